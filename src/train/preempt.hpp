#pragma once
// Preemption for the training loop (test-only faults: util/test_faults.hpp).
//
// SIGTERM and SIGUSR1 (Slurm's time-limit warning with --signal=B:USR1@120,
// forwarded by the job script; mpirun forwards SIGUSR1 to every rank) only
// set a flag. The trainer ORs the flags of all ranks in the per-step
// allreduce it already does, finishes the step, writes a checkpoint and exits
// with code 75 (kExitPreempted), which the job scripts requeue on.

namespace vitkd {

/// Installs the SIGTERM/SIGUSR1 handlers (idempotent).
void install_preemption_handlers();
/// True once this process received SIGTERM or SIGUSR1.
bool preemption_signalled();

}  // namespace vitkd
