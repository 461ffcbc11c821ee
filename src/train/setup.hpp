#pragma once
// Start-up of a training job: the configuration resolved into a plan of
// enums and numbers (TrainPlan) and the narrow specs of the loop's parts,
// everything checked before anything is written, and the components built
// in a fixed order (the student's initialisation depends on it), with the
// start-up echo on rank 0.
//
// The configuration's edge: this header and setup.cpp are the only files of
// src/ outside src/config/ and src/cmd/ that see Config (CTest
// layout.config_seen_only_at_its_edge). Every other part takes a spec, defined in
// its own header and built here by one builder each from the keys it reads.
#include <memory>
#include <string>

#include "comm/comm.hpp"
#include "comm/device.hpp"
#include "config/choices.hpp"
#include "data/transforms/transforms.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/tensors.hpp"
#include "distill/loss.hpp"
#include "distill/teacher.hpp"
#include "distill/view_cache.hpp"
#include "io/timing_log.hpp"
#include "model/precision.hpp"
#include "model/vit.hpp"
#include "optim/flat_params.hpp"
#include "optim/zero.hpp"
#include "train/profile.hpp"
#include "train/report.hpp"
#include "train/resume.hpp"
#include "train/run_state.hpp"
#include "train/step.hpp"
#include "train/trainer.hpp"
#include "util/timing.hpp"

namespace vitkd {

struct Config;  // config/config.hpp: seen by setup.cpp and the commands only

// RunMode, SiftScope and SiftCriterion (what sifting ranks samples by: the
// student's cross-entropy, or the distillation loss, which needs the teacher
// on every sample; distill mode only) are in config/choices.hpp.

/// The configuration as the loop uses it, resolved once (no strings compared
/// in the loop). Counts in optimizer steps or samples, as named.
struct TrainPlan {
  RunMode mode = RunMode::Teacher;
  bool bf16 = false;                ///< autocast matrix products to bf16 (precision resolved)
  torch::Device device{torch::kCPU};  ///< where the models, buffers and batches live (run.device)
  std::optional<SiftScope> sift;    ///< which samples sifting acts on (none: sift.enabled = false)
  SiftCriterion criterion = SiftCriterion::CrossEntropy;
  int64_t sift_delay = 0;           ///< steps before sifting starts
  double sift_beta = 0;             ///< keep probability pct^beta (sift.beta)
  int64_t sift_history = 0;         ///< losses, of all ranks' samples, sifting ranks against (sift.history)
  bool sift_trace = false;          ///< every decision to out_dir/sift_trace.txt (sift.trace)
  SiftPass sift_pass = SiftPass::Separate;  ///< scope "sample": a separate ranking pass, or the training forward's (sift.pass)
  EvalSplit eval_split = EvalSplit::Test;  ///< the split every evaluation reads (data.eval_split)
  int64_t batch = 0;                ///< samples per rank per step (data.batch_size)
  int64_t global_batch = 0;         ///< batch x ranks
  int64_t epochs = 0;               ///< train.epochs
  int64_t max_steps = 0;            ///< train.max_steps: optimizer steps the schedule stops at (0 = no limit)
  int64_t steps_per_epoch = 0, total_steps = 0;
  double total_samples = 0;         ///< samples the schedule ends at (the lr schedule counts samples)
  double warmup_samples = 0;
  int64_t threads = 1;              ///< compute threads per rank
  int64_t loader_threads = 0;       ///< threads transforming training batches ahead (0: on the compute thread)
  InputTransfer transfer = InputTransfer::Float32;  ///< data.transfer, resolved for the device and transform
  DistillSpec distill;
  AugmentSpec augment;
  DropPathSpec drop_path;           ///< the student's stochastic depth in training forwards (model.drop_path)
  AttentionKernel attention = AttentionKernel::Auto;  ///< model.attention

  bool distilling() const { return mode == RunMode::Distill; }
  bool sifting_at(int64_t step) const { return sift && step >= sift_delay; }
  /// Teacher logits pooled with the kept samples (criterion kd, scope sample).
  bool pools_logits() const { return criterion == SiftCriterion::Distillation; }
};

/// The components of one training job, built by setup_training() (owned on
/// the heap: the optimizer and its gradient hooks refer to the others).
struct TrainSetup {
  Clock::time_point started = Clock::now();  ///< when setup_training() began ("setup took")
  TrainPlan plan;
  // The loop's parts' specs, one builder each (below):
  RunSpec run;                ///< run.out_dir, run.seed
  StepSpec step_spec;         ///< optim.*, train.max_bad_steps
  CheckpointSpec checkpoint;  ///< checkpoint.*
  ReportSpec report;          ///< train.accuracy_thresholds
  ProfileSpec profile;        ///< train.profile_*
  LoopSpec loop;              ///< the loop's cadences and final measurements
  RunDevice device;                  ///< run.device and dist.backend, resolved
  DatasetMeta meta;
  ModelSpec spec;
  std::string config_text;           ///< the effective configuration as TOML
  std::unique_ptr<Teacher> teacher;  ///< distill mode only
  ViT student{nullptr};
  std::unique_ptr<FlatParams> flat;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<ShardedAdamW> opt;
  std::unique_ptr<Loader> train, test;  ///< test: the evaluations' split (data.eval_split)
  /// The test split when data.eval_split is "val" (null otherwise: `test` is it).
  std::unique_ptr<Loader> final_test;
  Loader& test_split() { return final_test ? *final_test : *test; }
  TimingLogAttrs timing_attrs;
  double flops_per_sample = 0;       ///< training FLOPs per trained sample (matrix products)
  PrecisionChoice precision;         ///< precision.compute / .reduce as resolved for this hardware
  double gemm_ceiling = 0;           ///< matrix-product FLOP/s per core in precision.compute, the MFU ceiling
  std::string gemm_ceiling_source;   ///< where gemm_ceiling came from (train.mfu_ceiling, kept, measured)
  std::string teacher_cache_file;    ///< where distill.teacher_cache reads and writes ("" when it is off)
  /// The teacher-view cache replayed instead of the teacher (distill.teacher_cache
  /// with augmentation, or with a `vitkd teacher-cache` file); null otherwise.
  std::unique_ptr<ViewCache> views;
  /// normalization_table_tensor() on the run's device [C, 256], with
  /// InputTransfer::Uint8 (undefined otherwise).
  torch::Tensor grey_levels;
};

/// The epochs of data a run of `cfg` reads at `world_size` ranks over a split
/// of `train_size` samples: train.epochs, or fewer where train.max_steps ends
/// it first (not with sift.enabled, whose steps read a varying number of
/// batches). What a teacher-view cache must hold, and what `vitkd
/// teacher-cache` writes by default.
int64_t epochs_needed(const Config& cfg, int64_t train_size, int64_t world_size);

// The builders: each narrow spec from the keys it reads, in one place.
/// model.<field> keys of the configuration as a ModelSpec (VITKD_MODEL_SPEC_FIELDS).
ModelSpec spec_from_config(const Config& cfg);
/// The loader's transform (data.* and model.image_size; data/transforms).
AugmentSpec augment_from_config(const Config& cfg);
/// The teacher of a distillation run (teacher.*, model.image_size,
/// model.attention, distill.temperature) in the resolved precision.
TeacherSpec teacher_spec(const Config& cfg, bool bf16);
RunSpec run_spec(const Config& cfg);                ///< run.out_dir, run.seed (train/run_state.hpp)
StepSpec step_spec(const Config& cfg);              ///< optim.*, train.max_bad_steps (train/step.hpp)
CheckpointSpec checkpoint_spec(const Config& cfg);  ///< checkpoint.* (train/resume.hpp)
ReportSpec report_spec(const Config& cfg);          ///< train.accuracy_thresholds (train/report.hpp)
ProfileSpec profile_spec(const Config& cfg);        ///< train.profile_* (train/profile.hpp)
LoopSpec loop_spec(const Config& cfg);              ///< train.* cadences, distill.eval_agreement (train/trainer.hpp)

/// Validates the configuration against the data and the world, creates
/// run.out_dir (checking every rank can write there), builds every spec and
/// component and echoes the run on rank 0. Collective. `origin` names the
/// config file. train_main() runs the job on what it returns.
std::unique_ptr<TrainSetup> setup_training(const Config& cfg, const std::string& origin);

// The start-up lines (train/setup_echo.cpp), rank 0's.
/// A warning about the whole run (every rank calls it): printed by rank 0.
void warn_once(const std::string& msg);
void echo_start(const Config& cfg, const std::string& origin, const TrainSetup& s, bool kept_memory);
void echo_model(const Config& cfg, const TrainSetup& s);
void echo_sifting(const Config& cfg, const TrainPlan& p);

}  // namespace vitkd
