#include "train/setup.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "comm/world.hpp"
#include "config/config.hpp"
#include "data/fits_model.hpp"
#include "model/gemm_rate.hpp"
#include "model/precision.hpp"
#include "train/evaluate.hpp"
#include "train/resume.hpp"
#include "util/alloc.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/kokkos_session.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

// Creates out_dir on rank 0 and checks that every rank can write there.
void prepare_out_dir(const std::string& dir) {
  int ok = 1;
  std::string why;
  if (world().root()) make_dirs(dir);
  barrier();
  const std::string probe = dir + "/.vitkd-write-test." + std::to_string(world().rank);
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) {
    ok = 0;
    why = std::strerror(errno);
  } else {
    std::fclose(f);
    std::remove(probe.c_str());
  }
  const int64_t bad = allreduce_sum(static_cast<int64_t>(1 - ok));
  if (bad)
    throw UserError("run.out_dir '" + dir + "' is not writable" + (why.empty() ? "" : " (" + why + ")") +
                    "; choose a directory you can write to");
}

// Compute threads per rank: train.threads, or the node's cores shared by its
// ranks. More threads than a rank's share of cores only oversubscribes them.
// Collective (hosts may differ, every rank must agree to fail).
// Loader threads per rank (data.loader_threads): as set, or the rank's
// cores beside its compute threads; 0 where the transform cannot leave the
// compute thread (a teacher-view cache's views, MPI-IO reads on demand, a
// Kokkos without its Serial space).
int64_t loader_threads(const Config& c, const TrainPlan& plan, bool replaying_views, std::string* why) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(1, cores / std::max(1, world().local_size));
  const int64_t want = c.data_loader_threads >= 0 ? c.data_loader_threads : std::max<int64_t>(0, share - plan.threads);
  if (want == 0) return 0;
  if (replaying_views) *why = "a teacher-view cache's views are replayed on the compute thread";
  else if (c.data_io == SampleIo::Mpio) *why = setting_text("data.io", SampleIo::Mpio) + " reads on the compute thread";
  else if (!transforms_can_run_on_loader_threads()) *why = "this Kokkos has no Serial space for loader threads";
  else return want;
  return 0;
}

int64_t compute_threads(const Config& c) {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(1, cores / std::max(1, world().local_size));
  const int64_t min_share = allreduce_min(share);
  if (c.train_threads > 0 && c.train_threads > min_share)
    throw UserError("train.threads = " + std::to_string(c.train_threads) + " is more than the " +
                    std::to_string(min_share) + " core(s) per rank of the smallest node here (cores / " +
                    "ranks on the node); set it to at most " + std::to_string(min_share) +
                    ", or 0 to choose automatically");
  return c.train_threads > 0 ? c.train_threads : share;
}

TrainPlan plan_from_config(const Config& cfg, int64_t threads) {
  TrainPlan p;
  p.mode = cfg.run_mode;
  if (cfg.sift_enabled) p.sift = p.distilling() ? cfg.sift_scope : SiftScope::Sample;
  // kd ranks by the distillation loss, so it needs a teacher: it is the
  // criterion only when distilling (whether or not sifting is on, as the
  // checkpoint's pooled-logit width records).
  p.criterion = p.distilling() ? cfg.sift_criterion : SiftCriterion::CrossEntropy;
  p.sift_delay = cfg.sift_delay;
  p.sift_beta = cfg.sift_beta;
  p.sift_history = cfg.sift_history;
  p.sift_trace = cfg.sift_trace, p.sift_pass = cfg.sift_pass;
  p.eval_split = cfg.data_eval_split;
  p.batch = cfg.data_batch_size;
  p.global_batch = cfg.data_batch_size * world().size;
  p.epochs = cfg.train_epochs;
  p.max_steps = cfg.train_max_steps;
  p.threads = threads;
  p.distill.hard = cfg.distill_kind == DistillKind::Hard;
  p.distill.temperature = cfg.distill_temperature;
  p.distill.alpha = cfg.distill_alpha;
  p.distill.label_smoothing = cfg.train_label_smoothing;
  p.augment = augment_from_config(cfg);
  p.drop_path.rate = cfg.model_drop_path;
  p.drop_path.seed = static_cast<uint64_t>(cfg.run_seed);  // run.seed, also where a view cache sets the views' seed
  return p;
}

// Steps and samples of the schedule; needs the loader's batches per epoch.
void plan_schedule(TrainPlan& p, const Config& cfg, int64_t train_size, int64_t steps_per_epoch) {
  p.steps_per_epoch = steps_per_epoch;
  p.total_steps = steps_per_epoch * cfg.train_epochs;
  if (cfg.train_max_steps > 0) p.total_steps = std::min(p.total_steps, cfg.train_max_steps);
  // The schedule counts samples seen, so it finishes whatever the step count.
  p.total_samples = std::min<double>(double(train_size) * cfg.train_epochs,
                                     cfg.train_max_steps > 0 ? double(cfg.train_max_steps) * p.global_batch
                                                             : 1e300);
  p.warmup_samples = double(cfg.optim_warmup_steps) * p.global_batch;
}

// distill.teacher_cache with augmentation, or with a teacher-view cache file:
// opens and checks the cache (before anything is written) and makes the run
// replay its views and soft targets instead of running the teacher.
void open_view_cache(const Config& cfg, TrainSetup& s) {
  const std::string file = cfg.distill_teacher_cache_file.empty() ? cfg.run_out_dir + "/teacher_views.h5"
                                                                  : cfg.distill_teacher_cache_file;
  if (!cfg.data_augment && cache_file_format(file) != "vitkd-teacher-views") return;  // the logit cache
  if (access(file.c_str(), F_OK) != 0)
    throw UserError("distill.teacher_cache with data.augment = true replays a teacher-view cache, and " + file +
                    " does not exist; write it first with `vitkd teacher-cache CONFIG.toml` (this "
                    "configuration), or set distill.teacher_cache_file to one");
  TrainPlan& plan = s.plan;
  s.views = std::make_unique<ViewCache>(
      file, view_cache_key(s.meta, *s.teacher, plan.augment, plan.distill.temperature));
  const int64_t needed = epochs_needed(cfg, s.meta.train_size, world().size);
  if (s.views->augmented() && needed > s.views->epochs())
    throw UserError(file + ": train.epochs = " + std::to_string(plan.epochs) +
                    (needed < plan.epochs ? " (" + std::to_string(needed) + " within train.max_steps)" : "") +
                    " is more than the " + std::to_string(s.views->epochs()) +
                    " epochs of views in the teacher-view cache; write a longer one (distill.cache_epochs >= " +
                    std::to_string(needed) + ") or lower train.epochs or train.max_steps");
  plan.augment.seed = s.views->seed();  // the cache's views, whatever this run's seed
  plan.distill.teacher_probs = true;    // its targets are softmax(t/tau), not logits
  s.teacher_cache_file = file;
}

}  // namespace

TeacherSpec teacher_spec(const Config& cfg, bool bf16) {
  TeacherSpec t;
  t.checkpoints = cfg.teacher_checkpoint.paths;
  t.torchscript = cfg.teacher_torchscript;
  t.view_side = cfg.model_image_size;
  t.attention = cfg.model_attention;
  t.temperature = cfg.distill_temperature;
  t.bf16 = bf16;
  return t;
}

AugmentSpec augment_from_config(const Config& cfg) {
  AugmentSpec a;
  a.enabled = cfg.data_augment;
  a.crop = cfg.data_crop;
  a.pad = cfg.data_crop_pad;
  a.flip = cfg.data_flip;
  a.scale_min = cfg.data_crop_scale.at(0);
  a.scale_max = cfg.data_crop_scale.at(1);
  a.ratio_min = cfg.data_crop_ratio.at(0);
  a.ratio_max = cfg.data_crop_ratio.at(1);
  a.crop_pct = cfg.data_crop_pct;
  a.out = cfg.model_image_size;
  a.seed = static_cast<uint64_t>(cfg.run_seed);
  a.trivial_augment = cfg.data_policy == Policy::TrivialAugment;
  a.erase_prob = cfg.data_random_erase;
  a.mix.mixup_alpha = cfg.data_mixup;
  a.mix.cutmix_alpha = cfg.data_cutmix;
  a.mix.prob = cfg.data_mixup_prob;
  a.mix.switch_prob = cfg.data_mixup_switch_prob;
  return a;
}

namespace {

// data.transfer for this device and transform: Auto sends grey levels to a
// GPU where the transform ends in them (a CPU reads the host's floats
// directly: nothing crosses).
InputTransfer input_transfer(InputTransfer key, const TrainPlan& plan, const std::string& origin) {
  const bool fits = transform_ends_in_grey_levels(plan.augment);
  if (key == InputTransfer::Float32) return InputTransfer::Float32;
  if (key == InputTransfer::Uint8) {
    if (!fits)
      throw UserError(origin + ": " + setting_text("data.transfer", InputTransfer::Uint8) +
                      " sends grey levels, but data.policy, data.random_erase or data.mixup/cutmix change normalized "
                      "values after the crop; set " + setting_text("data.transfer", InputTransfer::Auto) + " or \"" +
                      choice_name(InputTransfer::Float32) + "\", or turn those off");
    return InputTransfer::Uint8;
  }
  return fits && plan.device.is_cuda() ? InputTransfer::Uint8 : InputTransfer::Float32;
}

}  // namespace

int64_t epochs_needed(const Config& cfg, int64_t train_size, int64_t world_size) {
  if (cfg.train_max_steps <= 0 || cfg.sift_enabled) return cfg.train_epochs;
  const int64_t per_epoch = steps_per_epoch(train_size, cfg.data_batch_size * world_size, cfg.data_drop_last);
  if (per_epoch <= 0) return cfg.train_epochs;
  return std::min(cfg.train_epochs, (cfg.train_max_steps + per_epoch - 1) / per_epoch);
}

ModelSpec spec_from_config(const Config& c) {
  ModelSpec s;
#define VITKD_FROM_CONFIG(type, name, def, meaning) s.name = c.model_##name;
  VITKD_MODEL_SPEC_FIELDS(VITKD_FROM_CONFIG)
#undef VITKD_FROM_CONFIG
  return s;
}

RunSpec run_spec(const Config& cfg) { return RunSpec{cfg.run_out_dir, cfg.run_seed}; }

StepSpec step_spec(const Config& cfg) {
  StepSpec s;
  s.lr = cfg.optim_lr;
  s.min_lr = cfg.optim_min_lr;
  s.beta1 = cfg.optim_beta1;
  s.beta2 = cfg.optim_beta2;
  s.eps = cfg.optim_eps;
  s.weight_decay = cfg.optim_weight_decay;
  s.grad_clip = cfg.optim_grad_clip;
  s.max_bad_steps = cfg.train_max_bad_steps;
  return s;
}

CheckpointSpec checkpoint_spec(const Config& cfg) {
  return CheckpointSpec{cfg.checkpoint_resume, cfg.checkpoint_keep, cfg.checkpoint_every_steps};
}

ReportSpec report_spec(const Config& cfg) { return ReportSpec{cfg.train_accuracy_thresholds}; }

ProfileSpec profile_spec(const Config& cfg) { return ProfileSpec{cfg.train_profile_steps, cfg.train_profile_from_step}; }

LoopSpec loop_spec(const Config& cfg) {
  LoopSpec l;
  l.log_every_steps = cfg.train_log_every_steps;
  l.timing_every_steps = cfg.train_timing_every_steps;
  l.eval_every_steps = cfg.train_eval_every_steps;
  l.eval_every_epochs = cfg.train_eval_every_epochs;
  l.final_eval = cfg.train_final_eval;
  l.eval_agreement = cfg.distill_eval_agreement;
  return l;
}

namespace {

// The training and test loaders; the loader threads (data.loader_threads)
// transform the training batches ahead of the step where they can.
void make_loaders(const Config& cfg, TrainSetup& s) {
  const World& w = world();
  TrainPlan& plan = s.plan;
  LoaderOptions lo;
  lo.batch_size = cfg.data_batch_size;
  lo.seed = static_cast<uint64_t>(cfg.run_seed);
  lo.drop_last = cfg.data_drop_last;
  lo.prefetch = cfg.data_prefetch;
  lo.mpio = cfg.data_io == SampleIo::Mpio;
  lo.rank = w.rank;
  lo.world = w.size;
  s.test = std::make_unique<Loader>(s.meta, eval_loader_options(lo, cfg.data_eval_split));
  if (cfg.data_eval_split == EvalSplit::Val) s.final_test = std::make_unique<Loader>(s.meta, test_loader_options(lo));
  lo.mix = plan.augment.mixing();
  lo.mix_seed = plan.augment.seed;  // a teacher-view cache's seed when the run replays one
  std::string why;
  plan.loader_threads = loader_threads(cfg, plan, s.views != nullptr, &why);
  if (plan.loader_threads > 0) {
    const DatasetMeta meta = s.meta;
    const AugmentSpec aug = plan.augment;
    const InputTransfer transfer = plan.transfer;
    lo.transform = [meta, aug, transfer](Batch& b) { transform_on_loader_thread(b, meta, aug, transfer); };
    lo.threads = static_cast<int>(plan.loader_threads);
    log0("loader: %lld thread(s) per rank read and transform the batches ahead of the step\n",
         (long long)plan.loader_threads);
  } else {
    log0("loader: the transform runs on the compute thread%s%s\n", why.empty() ? "" : ": ", why.c_str());
  }
  s.train = std::make_unique<Loader>(s.meta, lo);
  const int64_t side = output_side(plan.augment, s.meta.height);
  const int64_t pixels = s.meta.channels * side * (plan.augment.out > 0 ? side : s.meta.width);
  if (plan.transfer == InputTransfer::Uint8) {
    s.grey_levels = normalization_table_tensor(s.meta).to(plan.device);
    log0("input transfer: uint8 grey levels, %lld B per sample, normalized on %s (%s)\n", (long long)pixels,
         plan.device.str().c_str(), setting_text("data.transfer", cfg.data_transfer).c_str());
  } else {
    log0("input transfer: float32, normalized on the host, %lld B per sample (%s)\n", (long long)(4 * pixels),
         setting_text("data.transfer", cfg.data_transfer).c_str());
  }
}

// The MFU ceiling, one per machine: train.mfu_ceiling, or measured once for a
// second with every rank of the node multiplying at once, then kept
// (model/gemm_rate.hpp) and read by every later run with the same host, CPU
// (model/precision.hpp's cpu_identity), LibTorch, precision, device, ranks
// per node and threads; the start-up line,
// result.json and the timing log all carry this one figure. Collective.
void set_mfu_ceiling(const Config& cfg, TrainSetup& s) {
  const World& w = world();
  const TrainPlan& plan = s.plan;
  s.gemm_ceiling = cfg.train_mfu_ceiling;
  s.gemm_ceiling_source = "train.mfu_ceiling";
  if (s.gemm_ceiling > 0) return;
  const auto dtype = plan.bf16 ? torch::kBFloat16 : torch::kFloat32;
  const std::string file = ceiling_file();
  const std::string key = w.host + "|" + cpu_identity() + "|libtorch-" + libtorch_version() + "|" + choice_name(plan.bf16 ? Precision::Bf16 : Precision::Fp32) + "|" +
                          plan.device.str() + "|ranks-" + std::to_string(w.local_size) + "|threads-" +
                          std::to_string(plan.threads);
  double mine = kept_ceiling(file, key);
  const bool kept = allreduce_min(mine > 0 ? 1 : 0) == 1;  // every rank's host has it, or all measure
  if (!kept) mine = measure_gemm_flops(dtype, 1.0, plan.device) / plan.threads;
  s.gemm_ceiling = allreduce_sum(mine) / w.size;  // the ranks' mean (one figure for the run)
  if (!kept && w.local_rank == 0 && !keep_ceiling(file, key, s.gemm_ceiling))
    std::fprintf(stderr, "vitkd: warning: could not keep the MFU ceiling in %s (measured again next run)\n",
                 file.c_str());
  s.gemm_ceiling_source = kept ? "kept in " + file : "measured for 1 s, kept in " + file;
}

}  // namespace

std::unique_ptr<TrainSetup> setup_training(const Config& cfg, const std::string& origin) {
  const World& w = world();
  auto out = std::make_unique<TrainSetup>();
  TrainSetup& s = *out;
  // First of all: the GPU must be current before anything touches CUDA.
  s.device = select_device(cfg.run_device, cfg.dist_backend);

  // ---- validate everything before writing anything -------------------------
  s.meta = validate_dataset_collective(cfg.data_path);
  if (cfg.data_eval_split == EvalSplit::Val && s.meta.val_size == 0)
    throw UserError(origin + ": " + setting_text("data.eval_split", EvalSplit::Val) + " but " + cfg.data_path +
                    " has no /val split; write one with `vitkd prepare ... --val-fraction 0.1` or set " +
                    setting_text("data.eval_split", EvalSplit::Test));
  s.spec = spec_from_config(cfg);
  check_spec_fits_data(s.spec, s.meta, origin, "model.", "", s.spec.image_size);
  check_views_fit(augment_from_config(cfg), s.meta);
  const int64_t G = cfg.data_batch_size * w.size;
  if (s.meta.train_size < G)
    throw UserError(cfg.data_path + ": /train has " + std::to_string(s.meta.train_size) +
                    " samples, fewer than one global batch (data.batch_size " +
                    std::to_string(cfg.data_batch_size) + " x " + std::to_string(w.size) +
                    " ranks); lower data.batch_size or use more data");
  s.plan = plan_from_config(cfg, compute_threads(cfg));
  TrainPlan& plan = s.plan;
  s.run = run_spec(cfg);
  s.step_spec = step_spec(cfg);
  s.checkpoint = checkpoint_spec(cfg);
  s.report = report_spec(cfg);
  s.profile = profile_spec(cfg);
  s.loop = loop_spec(cfg);
  plan.attention = attention_kernel(cfg.model_attention, origin);
  plan.device = s.device.torch_device();
  plan.transfer = input_transfer(cfg.data_transfer, plan, origin);
  // The precision probe and the teacher's bf16 copy run on the run's threads.
  torch::set_num_threads(static_cast<int>(plan.threads));
  s.precision = choose_precision(cfg.precision_compute, cfg.precision_reduce, plan.device);
  keep_resumed_precision(s.checkpoint, s.run.out_dir, s.precision);
  resolve_gather(cfg.precision_gather, s.precision);
  plan.bf16 = s.precision.bf16();
  // The unsharded path allreduces fp32 (validate_config refuses an explicit
  // bf16 there), so "auto" means fp32 for it.
  if (cfg.dist_sharding == Sharding::None) s.precision.reduce = Precision::Fp32;
  const std::string precision_warn = precision_warning(s.precision);
  if (!precision_warn.empty()) warn_once(precision_warn);
  if (plan.distilling()) {
    s.teacher = make_teacher(teacher_spec(cfg, plan.bf16), s.meta);  // checks it fits the data
    s.teacher->to(plan.device);
  }
  if (plan.distilling() && cfg.distill_teacher_cache) {  // the logit cache's file, or the view cache's
    s.teacher_cache_file = cfg.distill_teacher_cache_file.empty() ? cfg.run_out_dir + "/teacher_logits.h5"
                                                                  : cfg.distill_teacher_cache_file;
    open_view_cache(cfg, s);
  }
  prepare_out_dir(cfg.run_out_dir);

  kokkos_ensure(plan.threads);  // the augmentation and AdamW kernels
  const bool kept_memory = keep_freed_memory();  // util/alloc.hpp: no page faults per step
  s.config_text = config_to_toml(cfg);
  echo_start(cfg, origin, s, kept_memory);

  // ---- models: the seed fixes the student's initial weights ------------------
  if (plan.distilling()) log0("teacher: %s\n", s.teacher->describe().c_str());
  torch::manual_seed(static_cast<uint64_t>(cfg.run_seed));
  s.student = ViT(s.spec);  // initialised on the CPU: the same weights on every device
  s.student->set_attention(plan.attention);
  s.student->to(plan.device);
  s.flat = std::make_unique<FlatParams>(*s.student, w.size);
  broadcast_tensor(s.flat->params, 0);  // identical start
  CommPlacement where;
  where.device = plan.device;
  s.comm = make_communicator(s.device.backend, where);
  BucketOptions bopt;
  bopt.bucket_bytes = static_cast<int64_t>(cfg.dist_bucket_mb * 1024 * 1024);
  bopt.wire = s.precision.reduce == Precision::Bf16 ? WireType::BF16 : WireType::F32;
  bopt.overlap = cfg.dist_overlap;
  bopt.sharded = cfg.dist_sharding == Sharding::Zero1;
  s.opt = std::make_unique<ShardedAdamW>(*s.flat, *s.student, *s.comm, w.rank, bopt);
  if (s.precision.gather == Precision::Bf16)  // the forward reads the bf16 copy (optim/compute_copy.hpp)
    s.student->use_compute_weights(&s.opt->enable_compute_copy(s.student->matrix_operands()));
  echo_model(cfg, s);

  // ---- data ------------------------------------------------------------------
  make_loaders(cfg, s);

  // ---- schedule and the MFU ceiling --------------------------------------------
  plan_schedule(plan, cfg, s.meta.train_size, s.train->steps_per_epoch());
  log0("schedule: %lld steps (%lld per epoch, global batch %lld), warm-up %lld steps\n",
       (long long)plan.total_steps, (long long)plan.steps_per_epoch, (long long)G,
       (long long)cfg.optim_warmup_steps);
  // MFU ceiling: the matrix-product rate of one core in the precision the run
  // computes in (vitkd bench gemm). On a GPU: the device's rate shared by the
  // rank's threads, so that the ceiling times the threads is the device's
  // rate, as on the CPU.
  set_mfu_ceiling(cfg, s);
  // Training FLOPs per trained sample: student forward + backward (3x forward)
  // plus the teacher's forward when distilling (matrix products only).
  s.flops_per_sample = 3.0 * s.spec.forward_flops() + (plan.distilling() ? s.teacher->forward_flops() : 0.0);
  log0("FLOPs per trained sample %.3g; %s ceiling %.1f GFLOP/s per core (%s)\n", s.flops_per_sample,
       choice_name(s.precision.compute), s.gemm_ceiling / 1e9, s.gemm_ceiling_source.c_str());
  TimingLogAttrs& ta = s.timing_attrs;
  ta.mode = cfg.run_mode;
  ta.model = s.spec.describe();
  ta.parameters = s.spec.parameter_count();
  ta.teacher_parameters = plan.distilling() ? s.teacher->parameters() : 0;
  ta.bytes_per_rank = s.opt->memory().total();
  ta.all_gather_bytes = s.opt->all_gather_bytes();
  ta.threads_per_rank = plan.threads;
  ta.flops_per_sample = s.flops_per_sample;
  ta.gemm_bf16_flops_per_core = s.gemm_ceiling;
  ta.compute = s.precision.compute;
  ta.eval_split = cfg.data_eval_split;
  ta.input_transfer = plan.transfer;
  echo_sifting(cfg, plan);
  return out;
}

}  // namespace vitkd
