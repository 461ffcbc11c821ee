#pragma once
// vitkd's configuration: every key, its type, its default and its meaning in
// one table (VITKD_CONFIG_TABLE). The TOML file, `--set section.key=value`
// overrides, the start-up echo and the checkpoint copy all go through it.
#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace vitkd {

/// One path or several: a TOML string ("" = none) or an array of strings.
struct PathList {
  std::vector<std::string> paths;
  bool empty() const { return paths.empty(); }
  size_t size() const { return paths.size(); }
  const std::string& operator[](size_t i) const { return paths[i]; }
};

// X(section, key, C++ type, default, help); the types are std::string,
// int64_t, double, bool, std::vector<double> (a TOML array of numbers),
// PathList (a string or an array of strings), the choices' enums
// (config/choices.hpp: a TOML string, one of the choice's words) and
// ResumeFrom ("auto", "never" or a path).
#define VITKD_CONFIG_TABLE(X)                                                              \
  X(run, mode, RunMode, RunMode::Teacher, "\"teacher\" (cross-entropy) or \"distill\"")       \
  X(run, out_dir, std::string, "runs/default", "directory for everything the run writes")  \
  X(run, seed, int64_t, 42, "seed for the data order, augmentation and initialisation")    \
  X(run, device, DeviceKind, DeviceKind::Auto,                                                        \
    "\"auto\" (CUDA when LibTorch has it and every rank sees a GPU), \"cpu\" or \"cuda\"")     \
  X(data, path, std::string, "data/fmnist.h5", "HDF5 dataset made by `vitkd prepare`")     \
  X(data, batch_size, int64_t, 64, "samples per rank per step")                            \
  X(data, augment, bool, false, "training views: the random crop of data.crop and a horizontal flip") \
  X(data, crop, CropKind, CropKind::Pad, "random crop when augment is on: \"pad\" (shift by up to crop_pad pixels, zero padded; images stored at model.image_size) or \"random_resized\" (torchvision's RandomResizedCrop to model.image_size, bilinear; docs/training.md)") \
  X(data, crop_pad, int64_t, 2, "padding in pixels for the random crop")                   \
  X(data, crop_scale, std::vector<double>, (std::vector<double>{0.08, 1.0}), "random_resized: range of the crop's area as a fraction of the image, in (0, 1]") \
  X(data, crop_ratio, std::vector<double>, (std::vector<double>{0.75, 4.0 / 3.0}), "random_resized: range of the crop's aspect ratio (width / height), in (0, inf)") \
  X(data, crop_pct, double, 0.875, "evaluation (and unaugmented training) view of images stored larger than model.image_size: the shorter side resized to image_size / crop_pct, then the centre crop (timm's crop_pct); images stored at image_size are used whole") \
  X(data, flip, bool, true, "random horizontal flip when augment is on")                   \
  X(data, policy, Policy, Policy::None, "when augment is on, after the crop and flip: the augmentation policy, \"none\" or \"trivial_augment\" (torchvision's TrivialAugmentWide: one of 14 colour and geometric ops per view at a uniform magnitude; docs/training.md)") \
  X(data, random_erase, double, 0.0, "when augment is on: probability of random erasing, one box of 2-33 % of the view filled with per-pixel normal noise (timm's RandomErasing, mode \"pixel\"; DeiT uses 0.25); 0 = off") \
  X(data, mixup, double, 0.0, "when augment is on: Mixup's alpha, lam ~ Beta(alpha, alpha) per sample (timm's mixup_alpha; DeiT uses 0.8); 0 = off") \
  X(data, cutmix, double, 0.0, "when augment is on: CutMix's alpha (timm's cutmix_alpha; DeiT uses 1.0); 0 = off") \
  X(data, mixup_prob, double, 1.0, "probability that a sample is mixed when data.mixup or data.cutmix is on (timm's mixup_prob)") \
  X(data, mixup_switch_prob, double, 0.5, "with both data.mixup and data.cutmix on: probability of CutMix rather than Mixup for a sample (timm's mixup_switch_prob)") \
  X(data, drop_last, bool, false, "drop the last partial global batch of each epoch")      \
  X(data, prefetch, int64_t, 4, "batches the prefetch thread may read ahead")              \
  X(data, loader_threads, int64_t, -1, "threads per rank that read and transform the training batches ahead of the step; 0 = the transform runs on the compute thread (one thread only reads); -1 = the rank's cores beside its train.threads compute threads (0 when there are none)") \
  X(data, transfer, InputTransfer, InputTransfer::Auto, "how training batches leave the host: \"float32\" (normalized there), \"uint8\" (the views' grey levels, a quarter of the bytes, normalized where the model runs; resampled views rounded to whole grey levels; needs data.policy = \"none\", data.random_erase = 0 and no mixing, which work on normalized values) or \"auto\" (uint8 on a GPU where the transform allows it, float32 elsewhere; docs/training.md)") \
  X(data, eval_split, EvalSplit, EvalSplit::Test, "the split every evaluation during training reads: \"test\" or \"val\" (the validation split of `vitkd prepare --val-fraction`; then the final model also reads the test split once: result.json test_top1, test_predictions.json)") \
  X(data, io, SampleIo, SampleIo::Serial,                                                         \
    "sample reads: \"serial\" (each rank opens the file; a thread reads ahead) or \"mpio\" (one collective MPI-IO open; reads on demand)") \
  X(model, preset, std::string, "", "\"\" or one of timm's ViT shapes: \"vit_ti16\", \"vit_s16\", \"vit_b16\", \"vit_l16\" (patch 16 at 224x224x3, MLP ratio 4, LayerNorm eps 1e-6); a model key set beside it in the same source wins, and a preset set on the command line replaces the file's model keys (docs/configuration.md, Model presets)") \
  X(model, image_size, int64_t, 28, "input height and width in pixels")                    \
  X(model, channels, int64_t, 1, "input channels")                                         \
  X(model, patch, int64_t, 4, "patch size in pixels; must divide image_size")              \
  X(model, dim, int64_t, 192, "embedding width")                                           \
  X(model, depth, int64_t, 6, "number of transformer blocks")                              \
  X(model, heads, int64_t, 3, "attention heads; must divide dim")                          \
  X(model, mlp_ratio, double, 4.0, "MLP hidden width / dim")                               \
  X(model, classes, int64_t, 10, "number of classes")                                      \
  X(model, dist_token, bool, false, "add DeiT's distillation token and head")               \
  X(model, norm_eps, double, 1e-6, "LayerNorm epsilon (PyTorch's nn.LayerNorm default is 1e-5)") \
  X(model, init, InitScheme, InitScheme::TruncNormal, "\"trunc_normal\" (normal(0, 0.02) clipped at +-0.04) or \"torch\" (PyTorch's module defaults)") \
  X(model, decay, DecayScope, DecayScope::Matrices, "AdamW weight decay on \"matrices\" (not biases, norms, tokens, pos_embed) or \"all\" parameters") \
  X(model, drop_path, double, 0.0, "stochastic depth as timm's drop_path_rate, in [0, 1): in training, block i drops its attention and MLP branches per sample with probability drop_path * i / (depth - 1) and scales kept ones by 1 / keep; keyed by (run.seed, epoch, sample, block, branch); 0 = off (docs/training.md)") \
  X(model, attention, AttentionKernel, AttentionKernel::Auto, "attention kernel: \"auto\" (LibTorch's fused at::scaled_dot_product_attention where it has one, 2.1 and newer, on GPUs and in fp32; unfused on CPUs in bf16, where it measured faster), \"fused\" or \"unfused\" (bmm-softmax-bmm, every LibTorch; docs/training.md)") \
  X(teacher, checkpoint, PathList, PathList{}, "vitkd checkpoint of the teacher (distill mode); an array of checkpoints is an ensemble: the targets are the mean of their probabilities") \
  X(teacher, torchscript, std::string, "", "or a torch.jit.save file: normalized float [N,C,H,W] -> logits [N,K]") \
  X(distill, kind, DistillKind, DistillKind::Soft, "\"soft\" (KL) or \"hard\" (teacher argmax)")      \
  X(distill, temperature, double, 4.0, "softmax temperature tau for the soft loss")        \
  X(distill, alpha, double, 0.5, "weight of the distillation term in the soft loss")       \
  X(distill, teacher_cache, bool, false, "reuse cached teacher targets: with augment = false each sample's logits are computed once; with augment = true (or a `vitkd teacher-cache` file) the cached views and top-k targets replay, no teacher pass (docs/teacher-cache.md)") \
  X(distill, teacher_cache_file, std::string, "", "HDF5 file of cached teacher targets (\"\" = out_dir/teacher_logits.h5, or out_dir/teacher_views.h5 with augment = true)") \
  X(distill, cache_epochs, int64_t, 0, "`vitkd teacher-cache`: epochs of augmented views to write (0 = the epochs the training run reads: train.epochs, or fewer where train.max_steps ends it first; 1 when augment = false)") \
  X(distill, eval_agreement, bool, false, "at the final evaluation also measure the student's agreement with the teacher's test predictions and its KL to the teacher (result.json teacher_agreement, teacher_kl, teacher_kl_tau at distill.temperature, and the teacher's own teacher_test_top1; one teacher pass over the test set, not counted in teacher_forwards)") \
  X(distill, cache_top_k, int64_t, 10, "`vitkd teacher-cache`: teacher probabilities kept per view (clamped to the class count)") \
  X(train, epochs, int64_t, 3, "passes over the training data")                            \
  X(train, max_steps, int64_t, 0, "stop after this many optimizer steps (0 = no limit)")   \
  X(train, eval_every_epochs, int64_t, 1, "test top-1 every N epochs (0 = only at the end)") \
  X(train, eval_every_steps, int64_t, 0, "also test top-1 every N optimizer steps (0 = off)") \
  X(train, accuracy_thresholds, std::vector<double>, (std::vector<double>{0.85, 0.87, 0.88, 0.89, 0.90}), \
    "test top-1 levels whose first crossing result.json reports (time_to_accuracy); each in (0, 1]") \
  X(train, final_eval, bool, true, "evaluate after the last epoch (off for throughput benchmarks)") \
  X(train, log_every_steps, int64_t, 50, "progress line every N steps (rank 0)")           \
  X(train, threads, int64_t, 0, "compute threads per rank (0 = cores / ranks on the node)") \
  X(train, timing_every_steps, int64_t, 50, "append the timing log (timing.h5) every N steps") \
  X(train, mfu_ceiling, double, 0.0, "matrix-product FLOP/s per core of the compute precision used, for MFU (0 = measured once per machine for 1 s and kept in $VITKD_CEILING_FILE or ~/.cache/vitkd/gemm-ceilings.txt; docs/file-formats.md)") \
  X(train, label_smoothing, double, 0.0, "label smoothing e in [0, 1) of the cross-entropy against labels (0 = off)") \
  X(train, max_bad_steps, int64_t, 20, "stop (with a diagnostic checkpoint) after N consecutive NaN/Inf steps") \
  X(train, profile_steps, int64_t, 0, "record LibTorch's profiler over N training steps (teacher, student forward and backward, communication, optimizer) and write a Chrome trace per rank (profile-rank0.json, profile-rank1.json, ... in run.out_dir) for analysis/profile_ops.py (0 = off; docs/performance.md)") \
  X(train, profile_from_step, int64_t, 5, "the first step train.profile_steps profiles (1-based; after the warm-up steps), or a resumed run's first step where that is later") \
  X(optim, lr, double, 1e-3, "peak learning rate")                                         \
  X(optim, weight_decay, double, 0.05, "AdamW decoupled weight decay")                     \
  X(optim, warmup_steps, int64_t, 200, "linear warm-up steps, then cosine decay")          \
  X(optim, min_lr, double, 1e-5, "learning rate at the end of the cosine decay")           \
  X(optim, grad_clip, double, 1.0, "clip the global gradient norm (0 = off)")              \
  X(optim, beta1, double, 0.9, "AdamW beta1")                                              \
  X(optim, beta2, double, 0.999, "AdamW beta2")                                            \
  X(optim, eps, double, 1e-8, "AdamW epsilon")                                             \
  X(sift, enabled, bool, false, "train only on samples whose loss ranks high in the history") \
  X(sift, beta, double, 1.0, "keep probability pct^beta; expected kept fraction 1/(1+beta)")  \
  X(sift, history, int64_t, 500, "losses kept in the history (all ranks' samples)")          \
  X(sift, delay, int64_t, 1000, "optimizer steps before sifting starts")                     \
  X(sift, criterion, SiftCriterion, SiftCriterion::CrossEntropy, "\"ce\" (student CE picks, teacher on kept only) or \"kd\"") \
  X(sift, scope, SiftScope, SiftScope::Sample,                                                      \
    "\"sample\" (unkept samples skip training) or \"teacher\" (all train; unkept skip the teacher)") \
  X(sift, pass, SiftPass, SiftPass::Separate,                                                       \
    "scope \"sample\": \"separate\" (a no-grad ranking pass, kept samples pooled) or \"in_forward\" (ranked in the training forward, loss on the kept)") \
  X(sift, trace, bool, false, "write every decision to out_dir/sift_trace.txt (epoch index loss kept)") \
  X(dist, backend, Backend, Backend::Auto, "gradient communication: \"auto\" (NCCL on CUDA, MPI on CPUs), \"mpi\" or \"nccl\"") \
  X(dist, bucket_mb, double, 25.0, "gradient bucket size in MB (fp32) for the reduce-scatter") \
  X(dist, overlap, bool, true, "start bucket reduce-scatters during backward")              \
  X(dist, sharding, Sharding, Sharding::Zero1, "\"zero1\" (sharded AdamW) or \"none\" (allreduce baseline)") \
  X(precision, compute, Precision, Precision::Auto,                                                \
    "\"auto\" (bf16 on a GPU and on CPUs with native bf16, AVX512_BF16 or AMX; fp32 elsewhere; a resumed run keeps its checkpoint's), \"bf16\" (autocast matmuls) or \"fp32\"") \
  X(precision, reduce, Precision, Precision::Fp32,                                                 \
    "gradient reduce-scatter type: \"fp32\", \"bf16\", or \"auto\" (the compute precision chosen)") \
  X(precision, gather, Precision, Precision::Auto,                                                 \
    "parameter all-gather after the sharded step: \"auto\" (the compute precision; in bf16 the forward reads a bf16 copy gathered at half the bytes), \"bf16\" or \"fp32\" (autocast casts the weights)") \
  X(checkpoint, every_steps, int64_t, 1000, "write out_dir/checkpoint.h5 every N steps (0 = only at the end)") \
  X(checkpoint, keep, int64_t, 2, "checkpoints kept as out_dir/checkpoint-step<N>.h5 (the newest is also checkpoint.h5)") \
  X(checkpoint, resume, ResumeFrom, ResumeFrom{}, "\"auto\" (newest good checkpoint in out_dir), \"never\", or a PATH")

#define VITKD_CFG_FIELD(section, key, type, def, help) type section##_##key = def;

/// The whole configuration as typed fields named `<section>_<key>`.
struct Config {
  VITKD_CONFIG_TABLE(VITKD_CFG_FIELD)
  /// Not a key: where the model keys came from when model.preset and keys
  /// set beside it mix sources (parse_config; "" otherwise), for the echo.
  std::string model_sources;
};
#undef VITKD_CFG_FIELD

/// One entry of the table, for help text and suggestions.
struct ConfigKeyInfo {
  std::string name;  ///< "section.key"
  std::string type;  ///< "string" | "integer" | "float" | "bool" | "array of floats" | "string or array of strings"
  std::string def;   ///< default, as TOML
  std::string help;
};
const std::vector<ConfigKeyInfo>& config_keys();

/// model.preset: a ViT shape of timm's (`timm` names its model), written into
/// the model keys the configuration leaves unset: image_size 224, channels 3,
/// patch 16, dim, depth, heads, mlp_ratio 4, norm_eps 1e-6 (timm's ViTs have
/// QKV biases, as vitkd's always do). The classes come from model.classes.
struct ModelPreset {
  const char* name;  ///< the value of model.preset, e.g. "vit_s16"
  const char* timm;  ///< timm's model name, e.g. "vit_small_patch16_224"
  int64_t dim, depth, heads;
};
const std::vector<ModelPreset>& model_presets();

/// Parses TOML text (`origin` names it in errors) and applies `overrides`
/// ("section.key=value", value in TOML syntax or a bare string). Unknown keys,
/// wrong types and invalid values throw UserError naming the file and key.
Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides = {});

/// Reads the file, then parse_config().
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

/// Checks value ranges and cross-key constraints; throws UserError.
void validate_config(const Config& cfg, const std::string& origin);

/// The effective configuration as TOML, every key listed (the echo that goes
/// into the log and the checkpoint; parse_config() of it gives `cfg` back).
std::string config_to_toml(const Config& cfg);

}  // namespace vitkd
