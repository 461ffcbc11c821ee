#include "train/trainer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <chrono>
#include <csignal>
#include <thread>

#include "model/gemm_rate.hpp"
#include "data/augment.hpp"
#include "data/loader.hpp"
#include "comm/comm.hpp"
#include "comm/world.hpp"
#include "distill/loss.hpp"
#include "distill/teacher.hpp"
#include "distill/teacher_cache.hpp"
#include "io/checkpoint.hpp"
#include "io/json.hpp"
#include "io/timing_log.hpp"
#include "model/vit.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "optim/zero.hpp"
#include "sift/sifter.hpp"
#include "train/preempt.hpp"
#include "util/test_faults.hpp"
#include "util/timing.hpp"
#include "util/alloc.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

ModelSpec spec_from_config(const Config& c) {
  ModelSpec s;
  s.image_size = c.model_image_size;
  s.channels = c.model_channels;
  s.patch = c.model_patch;
  s.dim = c.model_dim;
  s.depth = c.model_depth;
  s.heads = c.model_heads;
  s.mlp_ratio = c.model_mlp_ratio;
  s.classes = c.model_classes;
  s.dist_token = c.model_dist_token;
  return s;
}

// The model must fit the data; `who` names the config keys or the teacher file.
void check_model_fits_data(const ModelSpec& s, const DatasetMeta& m, const std::string& who,
                           bool config_keys) {
  auto key = [&](const char* k) { return config_keys ? "model." + std::string(k) : std::string(k); };
  if (m.height != m.width)
    throw UserError(m.path + ": images are " + std::to_string(m.height) + "x" +
                    std::to_string(m.width) + "; vitkd needs square images");
  if (s.image_size != m.height)
    throw UserError(who + ": " + key("image_size") + " = " + std::to_string(s.image_size) +
                    " but the images in " + m.path + " are " + std::to_string(m.height) + "x" +
                    std::to_string(m.width) + "; set it to " + std::to_string(m.height));
  if (s.channels != m.channels)
    throw UserError(who + ": " + key("channels") + " = " + std::to_string(s.channels) + " but " +
                    m.path + " has " + std::to_string(m.channels) + " channels; set it to " +
                    std::to_string(m.channels));
  if (s.classes != m.num_classes)
    throw UserError(who + ": " + key("classes") + " = " + std::to_string(s.classes) + " but " +
                    m.path + " has " + std::to_string(m.num_classes) + " classes; set it to " +
                    std::to_string(m.num_classes));
}

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

int64_t auto_threads(const Config& c) {
  if (c.train_threads > 0) return c.train_threads;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::max<int64_t>(1, cores / std::max(1, world().local_size));
}

std::string fmt_duration(double s) {
  char b[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  return b;
}

// Normalized (and augmented) float input [n, C, H, W] for a batch.
torch::Tensor batch_input(const Batch& b, const DatasetMeta& m, const AugmentSpec& aug) {
  auto x = torch::empty({b.size(), m.channels, m.height, m.width}, torch::kFloat32);
  if (b.size() > 0)
    normalize_augment(b.pixels.data(), b.indices.data(), b.size(), m.height, m.width, m.channels,
                      m.mean, m.std, aug, b.epoch, x.data_ptr<float>());
  return x;
}

torch::Tensor batch_labels(const Batch& b) {
  return torch::from_blob(const_cast<int32_t*>(b.labels.data()), {b.size()}, torch::kInt32)
      .to(torch::kLong);
}

// Samples waiting for a training step: normalized inputs, labels and (with
// the kd sifting criterion) the teacher logits computed during selection.
struct PoolTake {
  torch::Tensor x, y, t, i;  ///< [n,C,H,W], [n], [n,K] or undefined, [n] sample indices
};
class SamplePool {
 public:
  int64_t size() const { return size_; }
  void add(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& t,
           const torch::Tensor& i) {
    if (x.size(0) == 0) return;
    xs_.push_back(x);
    ys_.push_back(y);
    ts_.push_back(t);
    is_.push_back(i);
    size_ += x.size(0);
  }
  /// Pooled sample indices, in pool order (for checkpoints).
  std::vector<int64_t> indices() const {
    std::vector<int64_t> out;
    for (auto& i : is_) out.insert(out.end(), i.data_ptr<int64_t>(), i.data_ptr<int64_t>() + i.numel());
    return out;
  }
  /// Pooled teacher logits [n*K] row-major, or empty when none were computed.
  std::vector<float> logits() const {
    std::vector<float> out;
    for (auto& t : ts_)
      if (t.defined()) {
        auto c = t.contiguous();
        out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
      }
    return out;
  }
  /// Removes and returns the first n samples (n <= size()).
  PoolTake take(int64_t n) {
    PoolTake out;
    if (n == 0) return out;
    auto cat = [](std::vector<torch::Tensor>& v) {
      return v.size() == 1 ? v[0] : torch::cat(v, 0);
    };
    auto x = cat(xs_), y = cat(ys_), i = cat(is_);
    const bool has_t = ts_.front().defined();
    torch::Tensor t = has_t ? cat(ts_) : torch::Tensor();
    out.x = x.narrow(0, 0, n);
    out.y = y.narrow(0, 0, n);
    out.i = i.narrow(0, 0, n);
    if (has_t) out.t = t.narrow(0, 0, n);
    xs_.clear();
    ys_.clear();
    ts_.clear();
    is_.clear();
    const int64_t rest = size_ - n;
    size_ = 0;
    if (rest > 0) add(x.narrow(0, n, rest), y.narrow(0, n, rest),
                      has_t ? t.narrow(0, n, rest) : torch::Tensor(), i.narrow(0, n, rest));
    return out;
  }

 private:
  std::vector<torch::Tensor> xs_, ys_, ts_, is_;
  int64_t size_ = 0;
};

// Distributed top-1 over the whole test split.
double evaluate(ViT& model, Loader& test, const DatasetMeta& meta, bool bf16) {
  torch::NoGradGuard ng;
  model->eval();
  test.begin_epoch(0);
  int64_t correct = 0, total = 0;
  AugmentSpec none;
  while (auto b = test.next()) {
    if (b->size() == 0) continue;
    auto x = batch_input(*b, meta, none);
    torch::Tensor pred;
    {
      AutocastBf16 ac(bf16);
      pred = model->forward(x).prediction().argmax(-1);
    }
    correct += pred.eq(batch_labels(*b)).sum().item<int64_t>();
    total += b->size();
  }
  model->train();
  correct = allreduce_sum(correct);
  total = allreduce_sum(total);
  return total ? double(correct) / double(total) : 0.0;
}

// The checkpoint to resume from ("" = start fresh), per checkpoint.resume.
// Rank 0 decides and tells the others, so every rank loads the same file.
std::string resolve_resume(const Config& cfg, ViT& model, int64_t numel) {
  std::string chosen, error;
  if (world().root() && cfg.checkpoint_resume != "never") {
    if (cfg.checkpoint_resume == "auto") {
      const auto cands = checkpoint_candidates(cfg.run_out_dir);
      std::string first_problem;
      for (size_t i = 0; i < cands.size() && chosen.empty(); ++i) {
        try {
          validate_training_checkpoint(cands[i], model, numel);
          chosen = cands[i];
        } catch (const UserError& e) {
          if (first_problem.empty()) first_problem = e.what();
          log0("resume: %s is unusable: %s\n", cands[i].c_str(), e.what());
        }
      }
      if (!chosen.empty() && chosen != cands.front())
        log0("resume: falling back to the previous good checkpoint %s\n", chosen.c_str());
      if (chosen.empty() && !cands.empty())
        error = "checkpoint.resume = \"auto\": " + cfg.run_out_dir +
                " holds checkpoints but none can be resumed (newest: " + first_problem +
                "); choose another run.out_dir, or set checkpoint.resume = \"never\" to start over";
    } else {
      try {
        validate_training_checkpoint(cfg.checkpoint_resume, model, numel);
        chosen = cfg.checkpoint_resume;
      } catch (const UserError& e) {
        error = std::string("checkpoint.resume: ") + e.what();
      }
    }
  }
  error = broadcast_string(error);
  if (!error.empty()) throw UserError(error);
  return broadcast_string(chosen);
}

}  // namespace

int train_main(const Config& cfg, const std::string& origin) {
  const World& w = world();
  const bool distill = cfg.run_mode == "distill";
  const bool bf16 = cfg.precision_compute == "bf16";
  const auto t_setup = Clock::now();

  // ---- validate everything before writing anything -------------------------
  DatasetMeta meta = validate_dataset(cfg.data_path);
  const ModelSpec spec = spec_from_config(cfg);
  check_model_fits_data(spec, meta, origin, true);
  const int64_t G = cfg.data_batch_size * w.size;
  if (meta.train_size < G)
    throw UserError(cfg.data_path + ": /train has " + std::to_string(meta.train_size) +
                    " samples, fewer than one global batch (data.batch_size " +
                    std::to_string(cfg.data_batch_size) + " x " + std::to_string(w.size) +
                    " ranks); lower data.batch_size or use more data");
  std::unique_ptr<Teacher> teacher;  // checks that it fits the data (distill/teacher.hpp)
  if (distill) teacher = make_teacher(cfg, meta, bf16);
  std::unique_ptr<TeacherCache> tcache;  // distill.teacher_cache (distill/teacher_cache.hpp)
  const std::string tcache_file = cfg.distill_teacher_cache_file.empty()
                                      ? cfg.run_out_dir + "/teacher_logits.h5"
                                      : cfg.distill_teacher_cache_file;
  prepare_out_dir(cfg.run_out_dir);

  const int64_t threads = auto_threads(cfg);
  torch::set_num_threads(static_cast<int>(threads));
  const bool kept_memory = keep_freed_memory();  // util/alloc.hpp: no page faults per step
  const std::string config_text = config_to_toml(cfg);
  log0("vitkd %s: %s on %d rank(s), %lld thread(s) per rank, compute %s\n", VITKD_VERSION,
       cfg.run_mode.c_str(), w.size, (long long)threads, cfg.precision_compute.c_str());
  log0("---- configuration (%s) ----\n%s----\n", origin.c_str(), config_text.c_str());
  log0("allocator: %s\n", kept_memory ? "freed memory stays in the process (no heap trimming)"
                                       : "left as configured (GLIBC_TUNABLES/MALLOC_* set, or not glibc)");
  log0("data: %s: %lld train, %lld test, %lldx%lldx%lld, %lld classes\n", meta.path.c_str(),
       (long long)meta.train_size, (long long)meta.test_size, (long long)meta.height,
       (long long)meta.width, (long long)meta.channels, (long long)meta.num_classes);

  // ---- models ----------------------------------------------------------------
  if (distill) log0("teacher: %s\n", teacher->describe().c_str());
  torch::manual_seed(static_cast<uint64_t>(cfg.run_seed));
  ViT student(spec);
  FlatParams flat(*student, w.size);
  broadcast_bytes(flat.params.data_ptr<float>(), flat.padded * 4, 0);  // identical start
  auto comm = make_communicator(cfg.dist_backend);
  BucketOptions bopt;
  bopt.bucket_bytes = static_cast<int64_t>(cfg.dist_bucket_mb * 1024 * 1024);
  bopt.wire = cfg.precision_reduce == "bf16" ? WireType::BF16 : WireType::F32;
  bopt.overlap = cfg.dist_overlap;
  bopt.sharded = cfg.dist_sharding == "zero1";
  ShardedAdamW opt(flat, *student, *comm, w.rank, bopt);
  const Shard shard = opt.shard();
  log0("%s: %s\n", distill ? "student" : "model", spec.describe().c_str());
  log0("communication: %s backend, %s, %lld gradient bucket(s) of <= %.1f MB, %s reduce, overlap %s\n",
       comm->name().c_str(), bopt.sharded ? "ZeRO-1 sharded AdamW" : "allreduce (unsharded)",
       (long long)opt.bucket_count(), cfg.dist_bucket_mb,
       cfg.precision_reduce.c_str(), cfg.dist_overlap ? "on" : "off");
  log0("memory per rank: parameters %lld B, gradients %lld B, optimizer state %lld B (shard %lld of %lld elements)\n",
       (long long)(flat.padded * 4), (long long)(flat.padded * 4 + (bopt.sharded ? shard.size * 4 : 0)),
       (long long)opt.state_bytes(), (long long)shard.size, (long long)flat.padded);

  // ---- data ------------------------------------------------------------------
  LoaderOptions lo;
  lo.batch_size = cfg.data_batch_size;
  lo.seed = static_cast<uint64_t>(cfg.run_seed);
  lo.drop_last = cfg.data_drop_last;
  lo.prefetch = cfg.data_prefetch;
  lo.rank = w.rank;
  lo.world = w.size;
  Loader train(meta, lo);
  LoaderOptions to = lo;
  to.split = "test";
  to.shuffle = false;
  to.drop_last = false;
  to.batch_size = std::max<int64_t>(cfg.data_batch_size, 256);
  Loader test(meta, to);
  AugmentSpec aug;
  aug.enabled = cfg.data_augment;
  aug.pad = cfg.data_crop_pad;
  aug.flip = cfg.data_flip;
  aug.seed = static_cast<uint64_t>(cfg.run_seed);

  const int64_t steps_per_epoch = train.steps_per_epoch();
  int64_t total_steps = steps_per_epoch * cfg.train_epochs;
  if (cfg.train_max_steps > 0) total_steps = std::min(total_steps, cfg.train_max_steps);
  // The schedule counts samples seen, so it finishes whatever the step count.
  const double total_samples =
      std::min<double>(double(meta.train_size) * cfg.train_epochs,
                       cfg.train_max_steps > 0 ? double(cfg.train_max_steps) * G : 1e300);
  const double warmup_samples = double(cfg.optim_warmup_steps) * G;
  DistillSpec dspec;
  dspec.hard = cfg.distill_kind == "hard";
  dspec.temperature = cfg.distill_temperature;
  dspec.alpha = cfg.distill_alpha;
  log0("schedule: %lld steps (%lld per epoch, global batch %lld), warm-up %lld steps\n",
       (long long)total_steps, (long long)steps_per_epoch, (long long)G,
       (long long)cfg.optim_warmup_steps);
  // MFU ceiling: the bf16 matrix-product rate of one core (vitkd bench gemm).
  double ceiling = cfg.train_mfu_ceiling;
  if (ceiling <= 0) ceiling = allreduce_sum(measure_gemm_bf16_flops(0.5) / threads) / w.size;
  // Training FLOPs per trained sample: student forward + backward (3x forward)
  // plus the teacher's forward when distilling (matrix products only).
  const double flops_per_sample =
      3.0 * spec.forward_flops() + (distill ? teacher->forward_flops() : 0.0);
  log0("FLOPs per trained sample %.3g; bf16 ceiling %.1f GFLOP/s per core\n", flops_per_sample,
       ceiling / 1e9);
  TimingLogAttrs ta;
  ta.mode = cfg.run_mode;
  ta.model = spec.describe();
  ta.parameters = spec.parameter_count();
  ta.teacher_parameters = distill ? teacher->parameters() : 0;
  ta.bytes_per_rank = flat.padded * 4 * 2 + opt.state_bytes() + (bopt.sharded ? shard.size * 4 : 0);
  ta.threads_per_rank = threads;
  ta.flops_per_sample = flops_per_sample;
  ta.gemm_bf16_flops_per_core = ceiling;

  // ---- sifting ---------------------------------------------------------------
  const bool sift_on = cfg.sift_enabled;
  const bool sift_kd = cfg.sift_criterion == "kd" && distill;
  // scope "teacher": every sample trains the student; the rule picks the ones
  // that also get the teacher's targets (the others train on their label).
  const bool sift_teacher = sift_on && distill && cfg.sift_scope == "teacher";
  Sifter sifter(cfg.sift_beta, cfg.sift_history, static_cast<uint64_t>(cfg.run_seed));
  if (sift_on)
    log0("sifting: beta %.2f (expected kept fraction %.2f), history %lld, from step %lld, criterion %s, "
         "scope %s\n",
         cfg.sift_beta, 1.0 / (1.0 + cfg.sift_beta), (long long)cfg.sift_history,
         (long long)cfg.sift_delay, sift_kd ? "kd (teacher on every sample)" : "ce (teacher on kept samples only)",
         sift_teacher ? "teacher (every sample trains; only kept samples get the teacher's targets)"
                      : "sample (only kept samples train)");

  FILE* sift_trace = nullptr;
  if (sift_on && cfg.sift_trace && w.root()) {
    const std::string path = cfg.run_out_dir + "/sift_trace.txt";
    sift_trace = std::fopen(path.c_str(), "w");
    VK_CHECK(FILE, sift_trace != nullptr);
  }

  // ---- resume ------------------------------------------------------------------
  const TestFaults& faults = TestFaults::get();
  install_preemption_handlers();
  PhaseTimes times;
  int64_t step = 0, bad_steps = 0, bad_run = 0, samples_seen = 0, samples_trained = 0,
          samples_kept = 0, teacher_forwards = 0;
  double test_top1 = -1, prior_train_seconds = 0;
  std::vector<double> top1_per_epoch;
  int64_t epochs_done = 0, start_epoch = 0, start_batch = 0;
  SamplePool pool;
  const int64_t logit_dim = sift_kd ? spec.classes : 0;  // pooled teacher logits per sample
  auto optimizer_shard = [&] {
    return OptimizerShard{flat.numel, flat.padded, shard, opt.adamw().m(), opt.adamw().v(),
                          opt.adamw().steps()};
  };
  const std::string resume_from = resolve_resume(cfg, student, flat.numel);
  if (!resume_from.empty()) {
    const CheckpointInfo info = read_checkpoint_info(resume_from);
    OptimizerShard os = optimizer_shard();
    const TrainState st = load_training_checkpoint(resume_from, student, os, w.rank, w.size);
    if (st.global_batch != G) {
      const bool fits = st.global_batch % w.size == 0;
      throw UserError(resume_from + " was written with a global batch of " +
                      std::to_string(st.global_batch) + " samples, this run has " +
                      std::to_string(G) + " (data.batch_size " + std::to_string(cfg.data_batch_size) +
                      " x " + std::to_string(w.size) + " ranks); " +
                      (fits ? "set data.batch_size = " + std::to_string(st.global_batch / w.size)
                            : std::string("use a rank count that divides ") + std::to_string(st.global_batch)) +
                      " to resume, or checkpoint.resume = \"never\" to start over");
    }
    if (st.seed != static_cast<uint64_t>(cfg.run_seed))
      throw UserError(resume_from + " was written with run.seed = " + std::to_string(st.seed) +
                      "; resume with the same seed (the data order depends on it), or set "
                      "checkpoint.resume = \"never\" to start over");
    opt.adamw().set_steps(os.adam_steps);
    step = info.step;
    epochs_done = info.epoch;
    test_top1 = info.test_top1;
    bad_steps = st.bad_steps;
    samples_seen = st.samples_seen;
    samples_trained = st.samples_trained;
    samples_kept = st.samples_kept;
    teacher_forwards = w.root() ? st.teacher_forwards : 0;  // reported as the sum over ranks
    prior_train_seconds = st.train_seconds;
    top1_per_epoch = st.top1_per_epoch;
    start_epoch = st.data_epoch;
    start_batch = st.data_batch;
    sifter.restore_history(st.sift_history);
    if (!st.pool_index.empty()) {
      Batch b = read_samples(meta, "train", st.pool_index, start_epoch);
      torch::Tensor t;
      if (sift_kd && st.logit_dim == spec.classes)
        t = torch::from_blob(const_cast<float*>(st.pool_logits.data()),
                             {b.size(), st.logit_dim}, torch::kFloat32).clone();
      auto x = batch_input(b, meta, aug);
      if (sift_kd && !t.defined()) t = teacher->logits(x);
      pool.add(x, batch_labels(b), t, torch::tensor(st.pool_index, torch::kLong));
    }
    log0("resume: from %s (written at %lld rank(s)): step %lld, epoch %lld, batch %lld of the epoch, "
         "%lld samples seen%s\n", resume_from.c_str(), (long long)info.world_size, (long long)step,
         (long long)start_epoch + 1, (long long)start_batch, (long long)samples_seen,
         info.world_size != w.size ? "; optimizer state resharded to this rank count" : "");
    if (st.complete) {
      log0("resume: the run in %s already finished its schedule; nothing to do (set "
           "checkpoint.resume = \"never\" to train again from scratch)\n", cfg.run_out_dir.c_str());
      return kExitOk;
    }
  }
  TimingLog tlog(cfg.run_out_dir + "/timing.h5", ta, cfg.train_timing_every_steps,
                 resume_from.empty() ? -1 : step);
  log0("setup took %.1f s\n", seconds_since(t_setup));

  if (distill && cfg.distill_teacher_cache) {
    tcache = std::make_unique<TeacherCache>(meta.train_size, meta.num_classes, teacher->describe(),
                                            meta.path);
    log0("%s\n", tcache->load(tcache_file).c_str());
  }

  // ---- loop ------------------------------------------------------------------
  double loss_acc = 0, loss_n = 0, last_loss = NAN, lr = 0, step_loss = NAN;
  int64_t step_n = 0;
  int64_t cur_epoch = start_epoch, data_batch = start_batch;  // the data cursor
  const int64_t seen_at_start = samples_seen, trained_at_start = samples_trained;
  std::vector<double> epoch_seconds;  // training wall time of each epoch of this run (no eval)
  const auto t_train = Clock::now();
  auto t_window = Clock::now();
  int64_t window_samples = 0, window_seen = 0, window_kept = 0;
  bool stop = false;
  student->train();
  int64_t last_global = 0;  // samples in the global batch fill_once read last

  // Teacher logits of samples `idx` with inputs `x` (n may be 0), from the
  // cache when it holds them all. With the cache on this is collective: every
  // rank calls it at the same point, so that fresh rows reach every rank.
  auto teacher_for = [&](const torch::Tensor& x, const torch::Tensor& idx) -> torch::Tensor {
    torch::Tensor t, fresh_i, fresh_t;
    if (x.defined() && x.size(0) > 0) {
      ScopedPhase ph(times, Phase::TeacherForward);
      if (tcache) t = tcache->lookup(idx);
      if (!t.defined()) {
        t = teacher->logits(x);
        teacher_forwards += x.size(0);
        fresh_i = idx;
        fresh_t = t;
      }
    }
    if (tcache) tcache->share(fresh_i, fresh_t);
    return t;
  };

  // The sifting rule on this rank's samples `indices` with losses `per` [n]
  // (n may be 0): gathers every rank's (index, loss) pairs, pushes them into
  // the history in index order, and returns the local rows kept. Collective.
  auto sift_rows = [&](const std::vector<int64_t>& indices, torch::Tensor per,
                       int64_t epoch) -> std::vector<int64_t> {
    const int64_t n = static_cast<int64_t>(indices.size());
    // Test-only fault injection: VITKD_TEST_SIFT_ZERO_LOSS_RANK=r gives rank r
    // zero losses, so it keeps (almost) nothing for many batches.
    if (faults.sift_zero_rank == w.rank && n > 0) per = torch::zeros_like(per);
    std::vector<double> mine(2 * n);
    if (n > 0) {
      const auto pd = per.detach().to(torch::kFloat64).contiguous();
      for (int64_t i = 0; i < n; ++i) {
        mine[2 * i] = static_cast<double>(indices[i]);
        mine[2 * i + 1] = pd.data_ptr<double>()[i];
      }
    }
    // Every rank pushes the same losses in the same order (by sample index).
    std::vector<double> all = allgatherv(mine);
    std::vector<std::pair<int64_t, double>> pairs;
    for (size_t i = 0; i + 1 < all.size(); i += 2) pairs.emplace_back(int64_t(all[i]), all[i + 1]);
    std::sort(pairs.begin(), pairs.end());
    std::vector<int64_t> idx;
    std::vector<double> losses;
    for (auto& p : pairs) {
      idx.push_back(p.first);
      losses.push_back(p.second);
    }
    const auto keep = sifter.select(idx, losses, epoch);
    if (sift_trace)
      for (size_t i = 0; i < idx.size(); ++i)
        std::fprintf(sift_trace, "%lld %lld %.9g %d\n", (long long)epoch, (long long)idx[i],
                     losses[i], int(keep[i]));
    int64_t kept_global = 0;
    for (auto k : keep) kept_global += k;
    window_kept += kept_global;
    samples_kept += kept_global;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) {
      auto it = std::lower_bound(idx.begin(), idx.end(), indices[i]);
      if (keep[it - idx.begin()]) rows.push_back(i);
    }
    return rows;
  };

  // Scope "teacher": the loss of `take` (n rows, n may be 0) from the
  // student's output `out`, where the rule, ranking the student's CE from this
  // very forward pass, picks the rows that get the distillation loss; the
  // others get CE on their label. The teacher runs on the kept rows only. With
  // every row kept this is exactly the plain distillation loss. Collective
  // (selection, teacher cache).
  auto teacher_sifted_loss = [&](const ViTOutput& out, const PoolTake& take, int64_t n) -> torch::Tensor {
    torch::Tensor ce;
    if (n > 0) {
      torch::NoGradGuard ng;
      AutocastBf16 ac(bf16);
      ce = teacher_loss_per_sample(out, take.y);
    }
    std::vector<int64_t> rows;
    {
      ScopedPhase ph(times, Phase::SiftForward);
      std::vector<int64_t> indices(n);
      if (n > 0) {
        const auto ic = take.i.contiguous();
        std::copy(ic.data_ptr<int64_t>(), ic.data_ptr<int64_t>() + n, indices.begin());
      }
      rows = sift_rows(indices, ce, cur_epoch);
    }
    const bool every = static_cast<int64_t>(rows.size()) == n;
    torch::Tensor sel = torch::tensor(rows, torch::kLong);
    torch::Tensor xk, ik;
    if (n > 0) {
      xk = every ? take.x : take.x.index_select(0, sel);
      ik = every ? take.i : take.i.index_select(0, sel);
    }
    const torch::Tensor t = teacher_for(xk, ik);
    if (n == 0) return torch::Tensor();
    ScopedPhase ph(times, Phase::StudentForward);
    AutocastBf16 ac(bf16);
    if (every) return distill_loss_per_sample(out, t, take.y, dspec).mean();
    torch::Tensor per = teacher_loss_per_sample(out, take.y);
    if (!rows.empty()) {
      ViTOutput kept{out.logits.index_select(0, sel),
                     out.dist_logits.defined() ? out.dist_logits.index_select(0, sel) : torch::Tensor()};
      per = per.index_copy(0, sel, distill_loss_per_sample(kept, t, take.y.index_select(0, sel), dspec));
    }
    return per.mean();
  };

  // One optimizer step on `n` pooled samples of a global step of `global_n`;
  // `need_teacher`: the pooled samples carry no teacher logits yet (the same
  // on every rank).
  // `teacher_sift`: scope "teacher" sifting picks the rows that get the
  // teacher (teacher_sifted_loss).
  auto train_step = [&](int64_t n, int64_t global_n, bool need_teacher, bool teacher_sift = false) {
    PoolTake take = pool.take(n);
    const double weight = global_n > 0 ? double(n) * w.size / double(global_n) : 0.0;
    if (need_teacher && !teacher_sift) {
      auto t = teacher_for(take.x, take.i);
      if (n > 0) take.t = t;
    }
    ViTOutput out;
    if (n > 0) {
      ScopedPhase ph(times, Phase::StudentForward);
      // Test-only fault injection (train/preempt.hpp): a straggler rank.
      if (faults.slow_rank == w.rank)
        std::this_thread::sleep_for(std::chrono::milliseconds(faults.slow_ms));
      AutocastBf16 ac(bf16);
      out = student->forward(take.x);
    }
    torch::Tensor loss;
    if (teacher_sift) {
      loss = teacher_sifted_loss(out, take, n);  // collective, also with n == 0
    } else if (n > 0) {
      ScopedPhase ph(times, Phase::StudentForward);
      AutocastBf16 ac(bf16);
      auto per = distill ? distill_loss_per_sample(out, take.t, take.y, dspec)
                         : teacher_loss_per_sample(out, take.y);
      loss = per.mean();
    }
    if (n > 0) {
      ScopedPhase ph(times, Phase::Backward);
      opt.begin_backward();
      (loss * weight).backward();
      step_loss = loss.item<double>();
      step_n = n;
      if (std::isfinite(step_loss)) {
        loss_acc += step_loss * n;
        loss_n += n;
      }
    } else {
      step_loss = NAN;
      step_n = 0;
      opt.begin_backward();
    }
    samples_trained += global_n;
    window_samples += global_n;
    lr = schedule_lr(double(samples_seen), warmup_samples, total_samples, cfg.optim_lr, cfg.optim_min_lr);
    const AdamWHyper h{lr, cfg.optim_beta1, cfg.optim_beta2, cfg.optim_eps, cfg.optim_weight_decay};
    const double gnorm = opt.step(h, cfg.optim_grad_clip, &times);
    if (!std::isfinite(gnorm)) {  // every rank sees the same global norm and skipped the update
      ++bad_steps;
      ++bad_run;
      log0("step %lld: non-finite loss or gradient (norm %g): update skipped (%lld in a row, "
           "train.max_bad_steps = %lld)\n", (long long)step + 1, gnorm, (long long)bad_run,
           (long long)cfg.train_max_bad_steps);
    } else {
      bad_run = 0;
    }
    flat.zero_grad();
    ++step;
  };

  // Reads one batch into the pool, sifted or whole; false at the end of the epoch.
  auto fill_once = [&](bool sifting) -> bool {
    std::optional<Batch> b;
    torch::Tensor x, y;
    {
      ScopedPhase ph(times, Phase::DataWait);
      b = train.next();
      if (!b) return false;
      x = batch_input(*b, meta, aug);
      y = batch_labels(*b);
      if (faults.corrupt(step) && w.rank == 0) x.fill_(NAN);  // test-only: a corrupt batch
    }
    data_batch = b->step + 1;
    auto idx_t = torch::tensor(b->indices, torch::kLong);
    samples_seen += b->global_size;
    window_seen += b->global_size;
    last_global = b->global_size;
    if (!sifting) {
      pool.add(x, y, torch::Tensor(), idx_t);
      return true;
    }
    // Selection pass (no grad): per-sample losses of every rank's samples.
    torch::Tensor per, t_logits;
    const int64_t n = b->size();
    if (sift_kd) t_logits = teacher_for(x, idx_t);  // collective with the cache
    if (n > 0) {
      torch::NoGradGuard ng;
      ScopedPhase ph(times, Phase::SiftForward);
      AutocastBf16 ac(bf16);
      ViTOutput out = student->forward(x);
      per = sift_kd ? distill_loss_per_sample(out, t_logits, y, dspec)
                    : cross_entropy_per_sample(out.prediction(), y);
    }
    const std::vector<int64_t> rows = sift_rows(b->indices, per, b->epoch);
    if (!rows.empty()) {
      auto sel = torch::tensor(rows, torch::kLong);
      pool.add(x.index_select(0, sel), y.index_select(0, sel),
               t_logits.defined() ? t_logits.index_select(0, sel) : torch::Tensor(),
               idx_t.index_select(0, sel));
    }
    return true;
  };

  // Collective: a training checkpoint at `path`; `publish` makes it
  // out_dir/checkpoint.h5 (keeping checkpoint.keep step files).
  auto write_checkpoint = [&](const std::string& path, bool complete, bool publish) {
    ScopedPhase ph(times, Phase::Checkpoint);
    CheckpointInfo info;
    info.spec = spec;
    info.step = step;
    info.epoch = epochs_done;
    info.world_size = w.size;
    info.mode = cfg.run_mode;
    info.config = config_text;
    info.test_top1 = test_top1;
    TrainState st;
    st.seed = static_cast<uint64_t>(cfg.run_seed);
    st.global_batch = G;
    st.data_epoch = cur_epoch;
    st.data_batch = data_batch;
    st.samples_seen = samples_seen;
    st.samples_trained = samples_trained;
    st.samples_kept = samples_kept;
    st.teacher_forwards = allreduce_sum(teacher_forwards);
    st.bad_steps = bad_steps;
    st.train_seconds = prior_train_seconds + seconds_since(t_train);
    st.complete = complete;
    st.top1_per_epoch = top1_per_epoch;
    st.sift_history = sifter.history().ordered();
    st.pool_index = pool.indices();
    st.logit_dim = logit_dim;
    if (logit_dim > 0) {
      st.pool_logits = pool.logits();
      st.pool_logits.resize(st.pool_index.size() * logit_dim, 0.0f);
    }
    save_training_checkpoint(path, student, info, st, optimizer_shard());
    if (publish && w.root()) publish_checkpoint(cfg.run_out_dir, path, cfg.checkpoint_keep);
    barrier();
  };

  for (int64_t epoch = start_epoch; epoch < cfg.train_epochs && !stop; ++epoch) {
    cur_epoch = epoch;
    data_batch = epoch == start_epoch ? start_batch : 0;
    const auto t_epoch = Clock::now();
    train.begin_epoch(epoch, data_batch);
    bool exhausted = false;
    while (!exhausted) {
      if (faults.kill_rank == w.rank && faults.kill_step == step) std::raise(SIGKILL);  // test-only
      times.next_step();
      const auto t_step = Clock::now();
      const int64_t seen_before = samples_seen, trained_before = samples_trained, kept_before = samples_kept;
      bool preempt = false;
      const bool sifting = sift_on && step >= cfg.sift_delay;
      if (!sifting || sift_teacher) {
        // Plain data parallelism: each step trains on exactly one global batch
        // (with scope "teacher", the rule picks who gets the teacher within it).
        exhausted = !fill_once(false);
        if (exhausted) break;
        if (!sifting) {
          samples_kept += last_global;
          window_kept += last_global;
        }
        train_step(pool.size(), last_global, distill, sifting);
      } else {
        // Kept samples accumulate until every rank has a full batch; all
        // ranks decide together (an allreduce), so none can wait alone.
        while (allreduce_min(pool.size()) < cfg.data_batch_size) {
          if (!fill_once(true)) {
            exhausted = true;
            break;
          }
        }
        if (exhausted) {
          // End of the epoch: flush every rank's leftover in one last step.
          const int64_t left = allreduce_sum(pool.size());
          if (left == 0) break;
          train_step(pool.size(), left, distill && !sift_kd);
        } else {
          train_step(cfg.data_batch_size, cfg.data_batch_size * w.size, distill && !sift_kd);
        }
      }

      {
        StepMetrics m;
        m.step = step;
        m.epoch = epoch;
        m.samples_seen = samples_seen;
        m.samples_trained = samples_trained;
        m.teacher_forwards = teacher_forwards;  // this rank's; summed by the report if needed
        // The global mean loss of this step, and whether any rank was told
        // to stop (SIGTERM/SIGUSR1), in the one allreduce a step needs anyway.
        const bool signalled = preemption_signalled() || (w.root() && faults.preempt_step == step);
        double ls[3] = {std::isfinite(step_loss) ? step_loss * step_n : 0.0, double(step_n),
                        signalled ? 1.0 : 0.0};
        allreduce_sum_inplace(ls, 3);
        preempt = ls[2] > 0;
        m.loss = ls[1] > 0 ? ls[0] / ls[1] : NAN;
        m.lr = lr;
        m.kept_fraction = samples_seen > seen_before
                              ? double(samples_kept - kept_before) / double(samples_seen - seen_before)
                              : 1.0;
        const double wall = seconds_since(t_step);
        m.images_per_second = wall > 0 ? double(samples_trained - trained_before) / wall : 0.0;
        tlog.record(times.step, wall, m);
      }
      if (step % cfg.train_log_every_steps == 0) {
        double sums[2] = {loss_acc, loss_n};
        allreduce_sum_inplace(sums, 2);
        last_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
        loss_acc = loss_n = 0;
        const double dt = seconds_since(t_window);
        const double ips = dt > 0 ? window_samples / dt : 0;
        const double elapsed = seconds_since(t_train);
        const double done = std::min(1.0, (samples_seen - seen_at_start) /
                                              std::max(1.0, total_samples - seen_at_start));
        const double eta = done > 0 ? elapsed * (1.0 - done) / done : 0.0;
        const int64_t tf = allreduce_sum(teacher_forwards);
        log0("step %lld/%lld | epoch %lld/%lld | loss %.4f | lr %.2e | seen %lld | trained %lld | kept %.2f | "
             "teacher fwd %lld | %.0f img/s | ETA %s\n",
             (long long)step, (long long)total_steps, (long long)epoch + 1,
             (long long)cfg.train_epochs, last_loss, lr, (long long)samples_seen,
             (long long)samples_trained, window_seen ? double(window_kept) / window_seen : 0.0,
             (long long)tf, ips, fmt_duration(eta).c_str());
        t_window = Clock::now();
        window_samples = window_seen = window_kept = 0;
      }
      if (bad_run >= cfg.train_max_bad_steps) {
        char name[64];
        std::snprintf(name, sizeof name, "/diagnostic-step%08lld.h5", (long long)step);
        write_checkpoint(cfg.run_out_dir + name, false, false);
        throw RuntimeError(std::to_string(bad_run) + " consecutive steps had a non-finite loss or "
                           "gradient (train.max_bad_steps = " + std::to_string(cfg.train_max_bad_steps) +
                           "); stopped at step " + std::to_string(step) + " and wrote " +
                           cfg.run_out_dir + name + " to inspect (`vitkd inspect`); lower optim.lr, "
                           "check the data, or resume from " + cfg.run_out_dir + "/checkpoint.h5",
                           /*collective=*/true);
      }
      if (preempt) {
        const std::string path = checkpoint_step_path(cfg.run_out_dir, step);
        write_checkpoint(path, false, true);
        if (tcache && w.root()) tcache->save(tcache_file);
        tlog.flush();
        log0("preempted (SIGTERM/SIGUSR1) after step %lld: wrote %s/checkpoint.h5; exiting with "
             "code %d so that the job is requeued; the next run resumes from it\n",
             (long long)step, cfg.run_out_dir.c_str(), int(kExitPreempted));
        return kExitPreempted;
      }
      if (step >= total_steps) {
        stop = true;
        break;
      }
      // No periodic checkpoint inside a run of non-finite steps: checkpoint.h5
      // stays at the last step that trained normally.
      if (cfg.checkpoint_every_steps > 0 && step % cfg.checkpoint_every_steps == 0 && bad_run == 0)
        write_checkpoint(checkpoint_step_path(cfg.run_out_dir, step), false, true);
    }
    epochs_done = epoch + 1;
    epoch_seconds.push_back(seconds_since(t_epoch));
    const bool last = (stop || epoch + 1 == cfg.train_epochs) && cfg.train_final_eval;
    if (last || (cfg.train_eval_every_epochs > 0 && (epoch + 1) % cfg.train_eval_every_epochs == 0)) {
      ScopedPhase ph(times, Phase::Eval);
      test_top1 = evaluate(student, test, meta, bf16);
      top1_per_epoch.push_back(test_top1);
      tlog.record_eval(step, epoch, test_top1);
      log0("epoch %lld: test top-1 %.4f\n", (long long)epoch + 1, test_top1);
    }
  }
  {
    double sums[2] = {loss_acc, loss_n};
    allreduce_sum_inplace(sums, 2);
    if (sums[1] > 0) last_loss = sums[0] / sums[1];
  }
  if (sift_trace) std::fclose(sift_trace);
  tlog.flush();
  if (tcache && w.root() && tcache->save(tcache_file))
    log0("teacher cache: %lld of %lld samples' logits saved to %s\n", (long long)tcache->filled(),
         (long long)tcache->size(), tcache_file.c_str());
  const double log_overhead = allreduce_max(tlog.overhead_seconds());
  const double run_seconds = seconds_since(t_train);  // this run (a resumed run adds its past)
  const double train_seconds = prior_train_seconds + run_seconds;
  const double eval_seconds = allreduce_max(times.total[static_cast<int>(Phase::Eval)]);
  const double ips = (samples_trained - trained_at_start) / std::max(1e-9, run_seconds - eval_seconds);

  // ---- outputs ---------------------------------------------------------------
  cur_epoch = epochs_done;
  data_batch = 0;
  write_checkpoint(checkpoint_step_path(cfg.run_out_dir, step), true, true);
  const int64_t teacher_forwards_total = allreduce_sum(teacher_forwards);
  const int64_t tcache_hits = allreduce_sum(tcache ? tcache->hits() : int64_t(0));
  if (w.root()) {
    JsonObject r;
    r.set("mode", cfg.run_mode)
        .set("world_size", w.size)
        .set("steps", step)
        .set("epochs", epochs_done)
        .set("test_top1", test_top1)
        .set("train_seconds", train_seconds)
        .set("samples_seen", samples_seen)
        .set("samples_trained", samples_trained)
        .set("images_per_second", ips)
        .set("parameters", spec.parameter_count())
        .set("mfu_bf16", flops_per_sample * ips / (ceiling * threads * w.size))
        .set("flops_per_sample", flops_per_sample)
        .set("gemm_bf16_flops_per_core", ceiling)
        .set("samples_kept", samples_kept)
        .set("kept_fraction", samples_seen ? double(samples_kept) / samples_seen : 0.0)
        .set("sift_scope", sift_on ? cfg.sift_scope : std::string("off"))
        .set("teacher_forwards", teacher_forwards_total)
        .set("teacher_parameters", distill ? teacher->parameters() : int64_t(0))
        .set("optimizer_bytes_per_rank", opt.state_bytes())
        .set("parameter_bytes_per_rank", flat.padded * int64_t(4))
        .set("gradient_bytes_per_rank", (flat.padded + (cfg.dist_sharding == "zero1" ? shard.size : 0)) * int64_t(4))
        .set("comm_bytes_sent_rank0", comm->bytes_sent())
        .set("comm_backend", comm->name())
        .set("final_loss", last_loss)
        .set("timing_log_overhead_fraction", log_overhead / std::max(1e-9, run_seconds))
        .set("resumed_from", resume_from)
        .set("epoch_seconds", epoch_seconds)
        .set("teacher_cache_hits", tcache_hits)
        .set("teacher_cache_filled", tcache ? tcache->filled() : int64_t(0))
        .set("skipped_steps", bad_steps)
        .set("test_top1_per_epoch", top1_per_epoch)
        .set("threads_per_rank", threads)
        .set("compute", cfg.precision_compute);
    std::vector<double> phase_totals(times.total.begin(), times.total.end());
    r.set("phase_seconds_rank0", phase_totals);
    r.write(cfg.run_out_dir + "/result.json");
  }
  log0("done: %lld steps, %lld epochs, test top-1 %.4f, %.0f img/s, %.1f s -> %s/result.json\n",
       (long long)step, (long long)epochs_done, test_top1, ips, train_seconds,
       cfg.run_out_dir.c_str());
  return kExitOk;
}

}  // namespace vitkd
