// `vitkd teacher-cache CONFIG.toml`: runs the teacher once over E epochs'
// replayable views of every training sample and writes the teacher-view
// cache (distill/view_cache.hpp, docs/teacher-cache.md) that students replay
// with distill.teacher_cache = true.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cmd/args.hpp"
#include "cmd/commands.hpp"
#include "comm/world.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "data/fits_model.hpp"
#include "data/loader.hpp"
#include "distill/teacher.hpp"
#include "distill/view_cache.hpp"
#include "model/precision.hpp"
#include "train/evaluate.hpp"
#include "train/setup.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/kokkos_session.hpp"

namespace vitkd {

int teacher_cache_main(const std::vector<std::string>& args) {
  const cli::Command& cmd = cli::command("teacher-cache");
  const cli::Args a = cli::parse(cmd, args);
  if (a.help()) return cli::print_help(cli::help_text(cmd));
  const std::string& origin = a.positional("CONFIG.toml");
  const Config cfg = load_config(origin, a.all("set"));
  if (cfg.run_mode != RunMode::Distill)
    throw UserError(origin + ": " + setting_text("run.mode", cfg.run_mode) + "; teacher-cache reads the distillation "
                    "configuration: set " + setting_text("run.mode", RunMode::Distill) +
                    " with teacher.checkpoint or teacher.torchscript");
  // ---- everything checked before anything is written -------------------------
  const DatasetMeta meta = validate_dataset_collective(cfg.data_path);
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads =
      cfg.train_threads > 0 ? cfg.train_threads : std::max<int64_t>(1, cores / std::max(1, world().local_size));
  torch::set_num_threads(static_cast<int>(threads));
  kokkos_ensure(threads);  // the view kernel
  // The teacher runs in the precision a training run would choose here
  // (model/precision.hpp), so that a cache and the live teacher agree.
  const PrecisionChoice precision = choose_precision(cfg.precision_compute, Precision::Fp32, torch::kCPU);
  const bool bf16 = precision.bf16();
  if (world().root() && !precision_warning(precision).empty())
    std::fprintf(stderr, "vitkd: warning: %s\n", precision_warning(precision).c_str());
  std::unique_ptr<Teacher> teacher = make_teacher(teacher_spec(cfg, bf16), meta);  // checks it fits the data (CPU)
  const AugmentSpec aug = augment_from_config(cfg);
  check_views_fit(aug, meta);
  // What the training run of this configuration reads (train.max_steps counted).
  const int64_t epochs =
      cfg.distill_cache_epochs > 0 ? cfg.distill_cache_epochs : epochs_needed(cfg, meta.train_size, world().size);
  int64_t k = cfg.distill_cache_top_k;
  if (k > meta.num_classes) {
    if (world().root())
      std::fprintf(stderr, "vitkd: warning: distill.cache_top_k = %lld is more than the %lld classes of %s; "
                   "clamped to %lld (the full distribution)\n", (long long)k, (long long)meta.num_classes,
                   meta.path.c_str(), (long long)meta.num_classes);
    k = meta.num_classes;
  }
  const std::string file = cfg.distill_teacher_cache_file.empty() ? cfg.run_out_dir + "/teacher_views.h5"
                                                                  : cfg.distill_teacher_cache_file;
  ViewCacheKey key = view_cache_key(meta, *teacher, aug, cfg.distill_temperature);
  if (world().root()) make_dirs(parent_dir(file));
  barrier();
  log0("teacher-cache: %s on %d rank(s), %lld thread(s) per rank, compute %s (%s); teacher: %s\n",
       origin.c_str(), world().size, (long long)threads, choice_name(precision.compute), precision.why.c_str(),
       key.teacher.c_str());
  log0("teacher-cache: %lld epoch(s) of views of %lld samples (%s, seed %lld), top-%lld of %lld classes at "
       "temperature %g -> %s\n", (long long)(aug.enabled ? epochs : 1), (long long)meta.train_size,
       aug.enabled ? "augmented" : "unaugmented: one epoch serves all", (long long)cfg.run_seed, (long long)k,
       (long long)meta.num_classes, cfg.distill_temperature, file.c_str());
  // The teacher's own accuracy first (a few seconds): what the students will learn from.
  {
    LoaderOptions lo;
    lo.batch_size = cfg.data_batch_size;
    lo.rank = world().rank;
    lo.world = world().size;
    Loader test(meta, test_loader_options(lo));
    key.teacher_test_top1 = teacher_top1(*teacher, test, meta, aug, torch::kCPU);
  }
  log0("teacher-cache: the teacher's test top-1 %.4f (%lld test samples)\n", key.teacher_test_top1,
       (long long)meta.test_size);
  const ViewCacheWritten w =
      write_view_cache(file, key, *teacher, meta, aug, epochs, k, std::max<int64_t>(1, cfg.data_batch_size));
  log0("teacher-cache: wrote %s: %lld views, %.1f MB (%.1f bytes per view), %lld teacher forward passes, "
       "%.1f s\n", file.c_str(), (long long)w.views, w.bytes / 1e6, double(w.bytes) / std::max<int64_t>(1, w.views),
       (long long)w.teacher_forwards, w.seconds);
  return kExitOk;
}

}  // namespace vitkd
