#pragma once
// `vitkd train`: the training loop for both modes (teacher, distill).
#include <cstdint>

namespace vitkd {

struct TrainSetup;

/// When the loop logs and evaluates, and what it measures at the end (beside
/// the checkpoints' cadence, CheckpointSpec::every_steps). Built by
/// loop_spec() in train/setup.cpp.
struct LoopSpec {
  int64_t log_every_steps = 1;     ///< a progress line every this many optimizer steps (train.log_every_steps)
  int64_t timing_every_steps = 1;  ///< the timing log appended every this many steps (train.timing_every_steps)
  int64_t eval_every_steps = 0;    ///< an evaluation every this many steps (0 = off; train.eval_every_steps)
  int64_t eval_every_epochs = 0;   ///< an evaluation every this many epochs (0 = only at the end; train.eval_every_epochs)
  bool final_eval = true;          ///< evaluate after the last epoch, and the final model's pass over the test split (train.final_eval)
  bool eval_agreement = false;     ///< distill mode: the final model's agreement with the teacher on the test split (distill.eval_agreement)
};

/// Runs one training job on the components setup_training() built; every
/// rank calls it. Returns the exit code.
int train_main(TrainSetup& setup);

}  // namespace vitkd
