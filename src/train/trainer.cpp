#include "train/trainer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "data/augment.hpp"
#include "data/loader.hpp"
#include "dist/comm.hpp"
#include "dist/world.hpp"
#include "distill/loss.hpp"
#include "io/checkpoint.hpp"
#include "io/json.hpp"
#include "model/vit.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "optim/zero.hpp"
#include "train/timing.hpp"
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
  CheckpointInfo teacher_info;
  if (distill) {
    teacher_info = read_checkpoint_info(cfg.teacher_checkpoint);
    check_model_fits_data(teacher_info.spec, meta, "teacher checkpoint " + cfg.teacher_checkpoint,
                          false);
  }
  prepare_out_dir(cfg.run_out_dir);

  const int64_t threads = auto_threads(cfg);
  torch::set_num_threads(static_cast<int>(threads));
  const std::string config_text = config_to_toml(cfg);
  log0("vitkd %s: %s on %d rank(s), %lld thread(s) per rank, compute %s\n", VITKD_VERSION,
       cfg.run_mode.c_str(), w.size, (long long)threads, cfg.precision_compute.c_str());
  log0("---- configuration (%s) ----\n%s----\n", origin.c_str(), config_text.c_str());
  log0("data: %s: %lld train, %lld test, %lldx%lldx%lld, %lld classes\n", meta.path.c_str(),
       (long long)meta.train_size, (long long)meta.test_size, (long long)meta.height,
       (long long)meta.width, (long long)meta.channels, (long long)meta.num_classes);

  // ---- models ----------------------------------------------------------------
  ViT teacher{nullptr};
  if (distill) {
    teacher = ViT(teacher_info.spec);
    load_checkpoint_weights(cfg.teacher_checkpoint, teacher);
    teacher->eval();
    for (auto& p : teacher->parameters()) p.set_requires_grad(false);
    log0("teacher: %s from %s (test top-1 %.4f)\n", teacher_info.spec.describe().c_str(),
         cfg.teacher_checkpoint.c_str(), teacher_info.test_top1);
  }
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
  log0("setup took %.1f s\n", seconds_since(t_setup));

  // ---- loop ------------------------------------------------------------------
  PhaseTimes times;
  int64_t step = 0, bad_steps = 0, samples_seen = 0, samples_trained = 0, teacher_forwards = 0;
  double loss_acc = 0, loss_n = 0, last_loss = NAN, lr = 0;
  double test_top1 = -1;
  std::vector<double> top1_per_epoch;
  int64_t epochs_done = 0;
  const auto t_train = Clock::now();
  auto t_window = Clock::now();
  int64_t window_samples = 0;
  bool stop = false;
  student->train();

  for (int64_t epoch = 0; epoch < cfg.train_epochs && !stop; ++epoch) {
    train.begin_epoch(epoch);
    for (;;) {
      times.next_step();
      std::optional<Batch> b;
      torch::Tensor x, y;
      {
        ScopedPhase ph(times, Phase::DataWait);
        b = train.next();
        if (!b) break;
        x = batch_input(*b, meta, aug);
        y = batch_labels(*b);
      }
      const int64_t n = b->size();
      // Weight so the averaged gradient is the mean over the global batch's R samples.
      const double weight = b->global_size > 0 ? double(n) * w.size / double(b->global_size) : 0.0;
      torch::Tensor t_logits;
      if (distill && n > 0) {
        ScopedPhase ph(times, Phase::TeacherForward);
        torch::NoGradGuard ng;
        AutocastBf16 ac(bf16);
        t_logits = teacher->forward(x).prediction().to(torch::kFloat32);
        teacher_forwards += n;
      }
      torch::Tensor loss;
      if (n > 0) {
        {
          ScopedPhase ph(times, Phase::StudentForward);
          AutocastBf16 ac(bf16);
          ViTOutput out = student->forward(x);
          auto per = distill ? distill_loss_per_sample(out, t_logits, y, dspec)
                             : teacher_loss_per_sample(out, y);
          loss = per.mean();
        }
        ScopedPhase ph(times, Phase::Backward);
        opt.begin_backward();
        (loss * weight).backward();
        loss_acc += loss.item<double>() * n;
        loss_n += n;
      }
      const int64_t global_n = b->global_size;
      samples_seen += global_n;
      samples_trained += global_n;
      window_samples += global_n;
      lr = schedule_lr(double(samples_seen), warmup_samples, total_samples, cfg.optim_lr,
                       cfg.optim_min_lr);
      const AdamWHyper h{lr, cfg.optim_beta1, cfg.optim_beta2, cfg.optim_eps, cfg.optim_weight_decay};
      const double gnorm = opt.step(h, cfg.optim_grad_clip, &times);
      if (!std::isfinite(gnorm)) ++bad_steps;
      flat.zero_grad();
      ++step;

      if (step % cfg.train_log_every_steps == 0 || step == total_steps) {
        double sums[2] = {loss_acc, loss_n};
        allreduce_sum_inplace(sums, 2);
        last_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
        loss_acc = loss_n = 0;
        const double dt = seconds_since(t_window);
        const double ips = dt > 0 ? window_samples / dt : 0;
        const double elapsed = seconds_since(t_train);
        const double eta = elapsed / step * (total_steps - step);
        log0("step %lld/%lld | epoch %lld/%lld | loss %.4f | lr %.2e | %.0f img/s | ETA %s\n",
             (long long)step, (long long)total_steps, (long long)epoch + 1,
             (long long)cfg.train_epochs, last_loss, lr, ips, fmt_duration(eta).c_str());
        t_window = Clock::now();
        window_samples = 0;
      }
      if (step >= total_steps) {
        stop = true;
        break;
      }
    }
    epochs_done = epoch + 1;
    const bool last = stop || epoch + 1 == cfg.train_epochs;
    if (last || (cfg.train_eval_every_epochs > 0 && (epoch + 1) % cfg.train_eval_every_epochs == 0)) {
      ScopedPhase ph(times, Phase::Eval);
      test_top1 = evaluate(student, test, meta, bf16);
      top1_per_epoch.push_back(test_top1);
      log0("epoch %lld: test top-1 %.4f\n", (long long)epoch + 1, test_top1);
    }
  }
  const double train_seconds = seconds_since(t_train);
  const double eval_seconds = allreduce_max(times.total[static_cast<int>(Phase::Eval)]);
  const double ips = samples_trained / std::max(1e-9, train_seconds - eval_seconds);

  // ---- outputs ---------------------------------------------------------------
  {
    ScopedPhase ph(times, Phase::Checkpoint);
    if (w.root()) {
      CheckpointInfo info;
      info.spec = spec;
      info.step = step;
      info.epoch = epochs_done;
      info.world_size = w.size;
      info.mode = cfg.run_mode;
      info.config = config_text;
      info.test_top1 = test_top1;
      save_checkpoint(cfg.run_out_dir + "/checkpoint.h5", student, info);
    }
    barrier();
  }
  const int64_t teacher_forwards_total = allreduce_sum(teacher_forwards);
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
        .set("kept_fraction", samples_seen ? double(samples_trained) / samples_seen : 0.0)
        .set("teacher_forwards", teacher_forwards_total)
        .set("teacher_parameters", distill ? teacher_info.spec.parameter_count() : int64_t(0))
        .set("optimizer_bytes_per_rank", opt.state_bytes())
        .set("parameter_bytes_per_rank", flat.padded * int64_t(4))
        .set("gradient_bytes_per_rank", (flat.padded + (cfg.dist_sharding == "zero1" ? shard.size : 0)) * int64_t(4))
        .set("comm_bytes_sent_rank0", comm->bytes_sent())
        .set("comm_backend", comm->name())
        .set("final_loss", last_loss)
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
