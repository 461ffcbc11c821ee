#pragma once
// The one mutable state of a training run. Its TrainState part is what a
// checkpoint stores (io/checkpoint.hpp): resume fills it, checkpoints are
// written from it. The rest lives for this process only. Beside it RunSpec,
// what names the run and where it writes, which does not change.
#include <cmath>
#include <cstdint>
#include <string>

#include "io/checkpoint.hpp"
#include "util/timing.hpp"

namespace vitkd {

/// Where a run writes and the seed that names it (run.out_dir, run.seed):
/// read by the checkpoints, the report, the profile, the sifting trace and
/// the loop. Built by run_spec() in train/setup.cpp.
struct RunSpec {
  std::string out_dir;  ///< directory of everything the run writes (checkpoints, result.json, logs)
  int64_t seed = 0;     ///< run.seed: data order, augmentation, initialisation; a checkpoint resumes only with it
};

/// Samples and losses since the last progress line (train.log_every_steps).
struct ProgressWindow {
  int64_t trained = 0, seen = 0, kept = 0;  ///< global samples
  double loss_sum = 0, loss_count = 0;      ///< this rank's finite step losses x samples
  Clock::time_point start = Clock::now();
  void reset() { *this = ProgressWindow(); }
};

/// The outcome of this rank's last optimizer step.
struct LastStep {
  double loss = NAN;         ///< this rank's mean loss (NaN when it had no samples)
  int64_t samples = 0;       ///< samples this rank trained on
  double lr = 0;             ///< learning rate applied
  int64_t global_batch = 0;  ///< samples of the global batch read last (all ranks)
};

struct RunState : TrainState {
  // TrainState, live: the data cursor (data_epoch, data_batch), the sample
  // counters, bad_steps and top1_per_epoch as they are now. Exceptions:
  // teacher_forwards counts this rank's teacher samples (a checkpoint stores
  // the sum over ranks); train_seconds and eval_seconds are the training and
  // evaluation times of earlier runs of this job (a checkpoint adds this
  // run's); evaluations holds every evaluation of the job, this run's
  // included, in the order they ran; sift_history and pool_* are
  // filled only when a checkpoint is read or written (their live copies are
  // the sifting selector and the sample pool).
  int64_t step = 0;         ///< optimizer steps done
  int64_t epochs_done = 0;  ///< epochs completed
  double test_top1 = -1;    ///< last evaluation, -1 before the first
  // This run only:
  int64_t bad_run = 0;      ///< consecutive non-finite steps
  int64_t input_bytes = 0;  ///< bytes of the training inputs this rank's host made (device_inputs)
  double logged_loss = NAN; ///< global mean loss of the last progress window
  LastStep last;
  ProgressWindow window;
};

}  // namespace vitkd
