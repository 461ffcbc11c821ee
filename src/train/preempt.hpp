#pragma once
// Preemption for the training loop (test-only faults: util/test_faults.hpp).
//
// SIGTERM and SIGUSR1 (Slurm's time-limit warning with --signal=B:USR1@120,
// forwarded by the job script; mpirun forwards SIGUSR1 to every rank) only
// set a flag. The trainer ORs the flags of all ranks in the per-step
// allreduce it already does, finishes the step, writes a checkpoint and exits
// with code 75 (kExitPreempted), which the job scripts requeue on.
//
// main() installs the handlers first of all, before MPI_Init, so that a signal
// that arrives while the ranks start (MPI start-up, data, teacher, caches) is
// remembered rather than fatal: the run then checkpoints after its first step
// and exits with 75 (a resumed run: after its first step on top of the
// checkpoint it resumed from). Commands other than `train` have nothing to
// checkpoint: release_preemption_signals() gives them the default actions back
// and delivers a signal that came before.

namespace vitkd {

/// Installs the SIGTERM/SIGUSR1 handlers (idempotent; async-signal-safe flag only).
void install_preemption_handlers();
/// True once this process received SIGTERM or SIGUSR1.
bool preemption_signalled();
/// The default actions of SIGTERM/SIGUSR1 again; a signal received before is
/// raised now (the process ends as it would have without the handlers).
void release_preemption_signals();

}  // namespace vitkd
