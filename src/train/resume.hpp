#pragma once
// A run's state to and from checkpoints (the file format: io/checkpoint.hpp).
//   choose_resume   which checkpoint, if any, checkpoint.resume points at
//   apply_resume    load it into the model, optimizer, run state, sifting
//                   history and sample pool
//   write_run_checkpoint  the inverse, for each kind of checkpoint a run writes
#include <cstdint>
#include <string>

#include "config/choices.hpp"
#include "io/checkpoint.hpp"
#include "model/precision.hpp"
#include "model/vit.hpp"
#include "sift/global_select.hpp"
#include "sift/sample_pool.hpp"
#include "train/run_state.hpp"
#include "util/timing.hpp"

namespace vitkd {

struct TrainPlan;
struct TrainSetup;

/// The checkpoint.* keys: where a run resumes from, when it writes and what
/// it keeps. Built by checkpoint_spec() in train/setup.cpp; the checkpoints
/// live in RunSpec::out_dir.
struct CheckpointSpec {
  ResumeFrom resume;        ///< "auto" (the newest good checkpoint in out_dir), "never" or a path (checkpoint.resume)
  int64_t keep = 0;         ///< step files kept, out_dir/checkpoint-step<N>.h5, the newest also checkpoint.h5 (checkpoint.keep)
  int64_t every_steps = 0;  ///< a periodic checkpoint every this many optimizer steps (0 = only at the end; checkpoint.every_steps)
};

/// The checkpoint to resume from ("" = start fresh), per checkpoint.resume:
/// "never", a path, or "auto" (the newest usable checkpoint in `out_dir`,
/// falling back to older step files). Rank 0 decides and tells the others,
/// so every rank loads the same file. Collective; UserError when
/// checkpoint.resume names no usable checkpoint.
std::string choose_resume(const CheckpointSpec& spec, const std::string& out_dir, ViT& model, int64_t numel);

/// A resumed run computes in the precision its checkpoint records (root
/// attribute `compute`): with precision.compute = "auto" the recorded one is
/// kept (bf16 only where bf16 products work here), and `p.why` says so; an
/// explicit precision.compute wins, with one line on rank 0 when it differs
/// from the record. The checkpoint is the one checkpoint.resume points at
/// (for "auto" the newest in `out_dir`), peeked at before choose_resume
/// validates it. Collective.
void keep_resumed_precision(const CheckpointSpec& spec, const std::string& out_dir, PrecisionChoice& p);

/// Loads `path` (from choose_resume) into the student, the optimizer shard
/// (resharded to this rank count), `state`, the sifting history and the pool,
/// after checking it was written with this run's global batch, seed and
/// evaluation split. Returns the checkpoint's header. Collective.
CheckpointInfo apply_resume(const std::string& path, TrainSetup& setup, RunState& state,
                            GlobalSelector& selector, SamplePool& pool);

/// What a resumed run does with its schedule.
enum class ResumedSchedule {
  Continue,  ///< the checkpoint is inside this run's schedule: train on
  Finished,  ///< the checkpoint finished this very schedule: nothing to do
  Extended,  ///< it finished a shorter schedule: train on to the new length
};
/// Compares the resumed state with this run's schedule (plan.total_steps, of
/// train.epochs and train.max_steps): UserError naming the checkpoint's step
/// when the schedule is shorter than the steps already done. Extended clears
/// state.complete and says so on rank 0; Finished names `out_dir`.
ResumedSchedule check_resumed_schedule(const std::string& path, const std::string& out_dir,
                                       const TrainPlan& plan, RunState& state);

enum class CheckpointKind {
  Periodic,    ///< CheckpointSpec::every_steps: out_dir/checkpoint-step<N>.h5, published as checkpoint.h5
  Preempted,   ///< after SIGTERM/SIGUSR1: the same, before exiting for a requeue
  Diagnostic,  ///< after train.max_bad_steps non-finite steps: out_dir/diagnostic-step<N>.h5, not published
  Final,       ///< the schedule is complete (the data cursor stays where it is, so a
               ///< longer schedule can continue from it)
};

/// Collective: writes the run's checkpoint of `kind` from `state` and the
/// components, atomically, into setup.run.out_dir (keeping setup.checkpoint.keep
/// step files), and returns its path. `run_seconds` is this run's training
/// time so far (the checkpoint stores it added to earlier runs').
std::string write_run_checkpoint(CheckpointKind kind, TrainSetup& setup,
                                 const RunState& state, GlobalSelector& selector,
                                 const SamplePool& pool, double run_seconds, PhaseTimes& times);

}  // namespace vitkd
