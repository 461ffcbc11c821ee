#pragma once
// Checkpoint files (HDF5), format "vitkd-checkpoint", version 1.
//
// Weights (every checkpoint):
//   /model/<parameter name>   float32, the parameter's shape (ViT's names)
// Training state (checkpoints written by `vitkd train`; attribute has_state = 1):
//   /optimizer/m, /optimizer/v  float32 [padded]: AdamW's moments over the flat,
//                               padded parameter buffer (optim/flat_params.hpp).
//                               Each rank writes its own shard's hyperslab.
//                               Attributes: numel (real parameters), padded,
//                               adam_steps (bias-correction step count).
//   /sift/history               float64 [h]: the global loss history, oldest first
//   /sift/pool_index            int64 [n]: samples kept by sifting but not yet
//                               trained, per rank, concatenated in rank order
//   /sift/pool_counts           int64 [world_size]: how many of them each rank holds
//   /sift/pool_teacher_logits   float32 [n, classes], only with sift.criterion = "kd"
//   /state/test_top1_per_epoch  float64 [e]
//   /state/evaluations          float64 [n, 6]: every test evaluation so far (EvalRecord),
//                               one row each, oldest first, columns: step, epoch,
//                               samples_seen, train_seconds, elapsed_seconds, test_top1.
//                               Optional: a checkpoint without it (older files)
//                               reads as no evaluations.
// Attributes on "/":
//   format, format_version, vitkd_version, mode ("teacher"|"distill"),
//   config (the effective configuration as TOML), step (optimizer steps done),
//   epoch (epochs completed), world_size, test_top1 (last accuracy or -1),
//   model_image_size, model_channels, model_patch, model_dim, model_depth,
//   model_heads, model_mlp_ratio, model_classes, model_dist_token,
//   compute ("bf16" | "fp32": the precision the run computed in; config keeps
//   what was asked, e.g. "auto"; absent before 0.4.0), has_state; with state also: seed, global_batch (samples per step),
//   data_epoch and data_batch (the data cursor: global batches of data_epoch
//   already read), samples_seen, samples_trained, samples_kept (samples the
//   sifting rule kept; read as samples_trained when absent), teacher_forwards, bad_steps,
//   train_seconds, complete (1 when the schedule has finished), eval_seconds
//   (of train_seconds, the time spent evaluating; read as 0 when absent).
// There is no RNG state to save: every random choice (data order,
// augmentation, sifting) is a counter-based function of (seed, epoch, index).
//
// Atomicity: a training checkpoint is written collectively to
// out_dir/checkpoint-step<N>.h5.tmp; every rank closes it; after a barrier
// rank 0 renames it to checkpoint-step<N>.h5, hard-links checkpoint.h5 to it
// (rename over the old link, so checkpoint.h5 is always a whole file), and
// deletes step files beyond checkpoint.keep. A rank killed mid-write leaves
// only a .tmp file behind; the previous checkpoint is untouched.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/h5.hpp"
#include "model/vit.hpp"
#include "optim/flat_params.hpp"

namespace vitkd {

constexpr const char* kCheckpointFormat = "vitkd-checkpoint";
constexpr int64_t kCheckpointVersion = 1;
constexpr H5Format kCheckpointH5{kCheckpointFormat, kCheckpointVersion, "checkpoint",
                                 "point at a checkpoint.h5 written by vitkd train"};

struct CheckpointInfo {
  ModelSpec spec;
  int64_t step = 0, epoch = 0, world_size = 1;
  std::string mode, config;
  double test_top1 = -1;
  bool has_state = false;  ///< written by `vitkd train` with optimizer and data state
  /// The precision the run computed in ("bf16" | "fp32"; "" = not recorded,
  /// files before 0.4.0). The master weights are fp32 either way.
  std::string compute;
};

/// One test evaluation (train.eval_every_steps, train.eval_every_epochs).
struct EvalRecord {
  int64_t step = 0;            ///< optimizer steps done when it ran
  int64_t epoch = 0;           ///< the epoch it ran in or at the end of (0-based)
  int64_t samples_seen = 0;    ///< samples read by then, all ranks
  double train_seconds = 0;    ///< training wall time by then, evaluations excluded
  double elapsed_seconds = 0;  ///< training wall time by then, evaluations included
  double test_top1 = 0;
};
/// Columns of /state/evaluations, in EvalRecord's order.
constexpr int64_t kEvalRecordColumns = 6;

/// Everything besides weights and optimizer moments that a resume needs.
struct TrainState {
  uint64_t seed = 0;
  int64_t global_batch = 0;      ///< samples per optimizer step (all ranks)
  int64_t data_epoch = 0;        ///< epoch the data cursor is in (0-based)
  int64_t data_batch = 0;        ///< global batches of data_epoch already read
  int64_t samples_seen = 0, samples_trained = 0;
  int64_t samples_kept = 0;  ///< samples the sifting rule kept (all of them without sifting)
  int64_t teacher_forwards = 0;  ///< all ranks together
  int64_t bad_steps = 0;         ///< non-finite steps skipped so far
  double train_seconds = 0;      ///< training wall time before this run
  double eval_seconds = 0;       ///< of which evaluating
  bool complete = false;         ///< the schedule has finished
  std::vector<double> top1_per_epoch;
  std::vector<EvalRecord> evaluations;  ///< oldest first
  std::vector<double> sift_history;  ///< oldest first
  /// This rank's pooled (kept, untrained) samples: split indices, and their
  /// teacher logits [n, logit_dim] row-major when sifting computed them.
  std::vector<int64_t> pool_index;
  std::vector<float> pool_logits;
  int64_t logit_dim = 0;
};

/// This rank's AdamW moments: shard.size floats each, for elements
/// [shard.offset, shard.offset + shard.size) of the padded flat buffer.
struct OptimizerShard {
  int64_t numel = 0, padded = 0;  ///< real and padded flat-buffer lengths
  Shard shard;
  float* m = nullptr;
  float* v = nullptr;
  int64_t adam_steps = 0;
};

/// The model shape as root attributes model_image_size, ..., model_dist_token
/// (shared by checkpoints and exports).
void write_model_spec_attrs(hid_t file, const ModelSpec& s);
/// /model/<parameter name> float32 datasets of `model` (one writer).
void write_model_weights(hid_t file, ViT& model);

/// Writes the model and `info` (weights only; call on one rank).
void save_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info);

/// Collective: writes a training checkpoint to `path` atomically (`path`.tmp,
/// closed by every rank, barrier, rename by rank 0). Returns when the file is
/// in place on every rank. `opt.shard` may cover the whole buffer on every
/// rank (unsharded optimizer): rank r then writes only its 1/P of it.
void save_training_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info,
                              const TrainState& state, const OptimizerShard& opt);

/// Rank 0 only: makes `step_file` (out_dir/checkpoint-step<N>.h5) the current
/// out_dir/checkpoint.h5 and deletes the oldest step files beyond `keep`.
void publish_checkpoint(const std::string& out_dir, const std::string& step_file, int64_t keep);

/// out_dir/checkpoint-step<N>.h5 for step N.
std::string checkpoint_step_path(const std::string& out_dir, int64_t step);

/// The checkpoints in out_dir, newest first: checkpoint.h5, then the step
/// files by step, descending (existing files only).
std::vector<std::string> checkpoint_candidates(const std::string& out_dir);

/// Reads and checks the header of a checkpoint (UserError naming `path`).
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Loads /model/* into `model`; every parameter must be present with its shape.
void load_checkpoint_weights(const std::string& path, ViT& model);

/// Checks that `path` is a complete training checkpoint for `model` (header,
/// every dataset and its shape, the optimizer over `numel` parameters);
/// UserError naming the file and the problem otherwise. Reads no tensor data.
CheckpointInfo validate_training_checkpoint(const std::string& path, ViT& model, int64_t numel);

/// Loads a training checkpoint (every rank reads independently): weights into
/// `model`, this rank's moments into `opt` (resharded when the checkpoint was
/// written at another rank count: each rank reads its new range), and the
/// state. Pooled samples are handed back to the rank that held them at the
/// same rank count, or split evenly across ranks otherwise.
TrainState load_training_checkpoint(const std::string& path, ViT& model, OptimizerShard& opt,
                                    int rank, int world_size);

}  // namespace vitkd
