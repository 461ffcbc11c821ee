#include "train/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "comm/world.hpp"
#include "io/json.hpp"
#include "model/gemm_rate.hpp"
#include "train/setup.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {

std::string fmt_duration(double s) {
  char b[32];
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(b, sizeof b, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else std::snprintf(b, sizeof b, "%ldm%02lds", t / 60, t % 60);
  return b;
}

void log_progress(const TrainPlan& plan, RunState& st, int64_t epoch, int64_t seen_at_start,
                  double elapsed) {
  ProgressWindow& win = st.window;
  double sums[2] = {win.loss_sum, win.loss_count};
  allreduce_sum_inplace(sums, 2);
  st.logged_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  const double dt = seconds_since(win.start);
  const double ips = dt > 0 ? win.trained / dt : 0;
  const double done = std::min(1.0, (st.samples_seen - seen_at_start) /
                                        std::max(1.0, plan.total_samples - seen_at_start));
  const double eta = done > 0 ? elapsed * (1.0 - done) / done : 0.0;
  const int64_t tf = allreduce_sum(st.teacher_forwards);
  // The epochs this run reaches: train.epochs, or fewer where train.max_steps stops it.
  const int64_t epochs = plan.steps_per_epoch > 0
                             ? std::min(plan.epochs, (plan.total_steps + plan.steps_per_epoch - 1) / plan.steps_per_epoch)
                             : plan.epochs;
  log0("step %lld/%lld | epoch %lld/%lld | loss %.4f | lr %.2e | seen %lld | trained %lld | kept %.2f | "
       "teacher fwd %lld | %.0f img/s | ETA %s\n",
       (long long)st.step, (long long)plan.total_steps, (long long)epoch + 1, (long long)std::max(epochs, epoch + 1),
       st.logged_loss, st.last.lr, (long long)st.samples_seen, (long long)st.samples_trained,
       win.seen ? double(win.kept) / win.seen : 0.0, (long long)tf, ips, fmt_duration(eta).c_str());
  win.reset();
}

void close_loss_window(RunState& st) {
  double sums[2] = {st.window.loss_sum, st.window.loss_count};
  allreduce_sum_inplace(sums, 2);
  if (sums[1] > 0) st.logged_loss = sums[0] / sums[1];
}

std::vector<int64_t> first_reaching(const std::vector<EvalRecord>& evals,
                                    const std::vector<double>& thresholds) {
  std::vector<int64_t> first(thresholds.size(), -1);
  for (size_t t = 0; t < thresholds.size(); ++t)
    for (size_t i = 0; i < evals.size() && first[t] < 0; ++i)
      if (evals[i].test_top1 >= thresholds[t]) first[t] = static_cast<int64_t>(i);
  return first;
}

namespace {
// Where in training an evaluation happened: the fields both lists report.
constexpr const char* kPointKeys[] = {"step", "samples_seen", "train_seconds", "elapsed_seconds"};
JsonObject& set_point(JsonObject& o, const EvalRecord& e) {
  return o.set(kPointKeys[0], e.step)
      .set(kPointKeys[1], e.samples_seen)
      .set(kPointKeys[2], e.train_seconds)
      .set(kPointKeys[3], e.elapsed_seconds);
}
}  // namespace

std::vector<JsonObject> evaluations_json(const std::vector<EvalRecord>& evals) {
  return evaluations_json(evals, EvalSplit::Test);
}

std::vector<JsonObject> evaluations_json(const std::vector<EvalRecord>& evals, EvalSplit split) {
  std::vector<JsonObject> out;
  for (const EvalRecord& e : evals) {
    JsonObject o;
    set_point(o, e).set("epoch", e.epoch).set(std::string(choice_name(split)) + "_top1", e.test_top1);
    out.push_back(o);
  }
  return out;
}

void write_predictions_json(const std::string& path, const std::string& split, const std::string& dataset,
                            const SplitPredictions& p) {
  JsonObject o;
  o.set("split", split).set("dataset", dataset).set("top1", p.top1()).set("samples", int64_t(p.labels.size()));
  std::vector<int64_t> labels(p.labels.begin(), p.labels.end()), preds(p.predictions.begin(), p.predictions.end());
  o.set("labels", labels).set("predictions", preds);
  o.write(path);
}

std::vector<JsonObject> time_to_accuracy_json(const std::vector<EvalRecord>& evals,
                                              const std::vector<double>& thresholds) {
  const std::vector<int64_t> first = first_reaching(evals, thresholds);
  std::vector<JsonObject> out;
  for (size_t t = 0; t < thresholds.size(); ++t) {
    JsonObject o;
    o.set("threshold", thresholds[t]).set("reached", first[t] >= 0);
    if (first[t] >= 0)
      set_point(o, evals[first[t]]);
    else
      for (const char* k : kPointKeys) o.set_null(k);
    out.push_back(o);
  }
  return out;
}

// Now, UTC, to the minute ("2026-12-03 12:45 UTC"): result.json's finished_utc, so that a kept
// run names its date beside its version and CPU.
static std::string utc_minute_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &tm);
  return text;
}

void report_run(TrainSetup& s, const RunState& st, const RunTiming& t,
                TeacherTargets* targets, const std::string& resumed_from, int64_t extended_from) {
  const World& w = world();
  TeacherCache* cache = targets ? targets->cache() : nullptr;
  const int64_t teacher_forwards = allreduce_sum(st.teacher_forwards);
  ViewCache* views = targets ? targets->views() : nullptr;
  const int64_t cache_hits = allreduce_sum(cache ? cache->hits() : views ? views->hits() : int64_t(0));
  const double cache_read_seconds = allreduce_max(views ? views->read_seconds() : 0.0);
  const double train_seconds = st.train_seconds + t.run_seconds;  // a resumed run adds its past
  const double ips =
      (st.samples_trained - t.trained_at_start) / std::max(1e-9, t.run_seconds - t.eval_seconds);
  const MemoryFootprint mem = s.opt->memory();
  // The read mode that ran, from each rank's open files (Loader::io_mode).
  const bool mpio_here = s.train->io_mode() == SampleIo::Mpio && (!s.test || s.test->io_mode() == SampleIo::Mpio);
  const int64_t mpio_ranks = allreduce_sum(int64_t(mpio_here ? 1 : 0));
  const std::string data_io = mpio_ranks == w.size ? choice_name(SampleIo::Mpio)
                              : mpio_ranks == 0    ? choice_name(SampleIo::Serial)
                                                   : "mixed";
  const bool val = s.plan.eval_split == EvalSplit::Val;  // the evaluations read /val; test once at the end
  // MFU: the model's matrix-product FLOP/s per core over the ceiling. Above 1
  // the ceiling is wrong (measured under load, or given too low): no MFU is
  // written then, only the two figures, with one warning.
  const double achieved = s.flops_per_sample * ips / (s.plan.threads * w.size);
  const double mfu = achieved / s.gemm_ceiling;
  if (w.root() && mfu > 1)
    std::fprintf(stderr, "vitkd: warning: this run reached %.1f GFLOP/s per core, above its MFU ceiling of %.1f (%s): "
                 "no MFU written; measure the ceiling again (delete it from %s, or `vitkd bench gemm`) or set "
                 "train.mfu_ceiling\n", achieved / 1e9, s.gemm_ceiling / 1e9, s.gemm_ceiling_source.c_str(),
                 ceiling_file().c_str());
  if (w.root()) {
    const bool distill = s.plan.distilling();
    JsonObject r;
    r.set("mode", s.plan.mode)
        .set("world_size", w.size)
        .set("steps", st.step)
        .set("epochs", st.epochs_done)
        .set("test_top1", val ? (t.test_predictions ? t.test_predictions->top1() : -1.0) : st.test_top1)
        .set("eval_split", s.plan.eval_split)
        .set("train_seconds", train_seconds)
        .set("samples_seen", st.samples_seen)
        .set("samples_trained", st.samples_trained)
        .set("images_per_second", ips)
        .set("parameters", s.spec.parameter_count())
        .set("mfu_bf16", mfu > 1 ? NAN : mfu)
        .set("flops_per_sample", s.flops_per_sample)
        .set("gemm_bf16_flops_per_core", s.gemm_ceiling)
        .set("samples_kept", st.samples_kept)
        .set("kept_fraction", st.samples_seen ? double(st.samples_kept) / st.samples_seen : 0.0)
        .set("sift_scope", s.plan.sift ? std::string(choice_name(*s.plan.sift)) : std::string("off"))
        // scope "teacher" ranks in the training forward by construction
        .set("sift_pass", !s.plan.sift ? std::string("off")
                          : choice_name(s.plan.sift == SiftScope::Teacher ? SiftPass::InForward : s.plan.sift_pass))
        .set("teacher_forwards", teacher_forwards)
        .set("teacher_parameters", distill ? s.teacher->parameters() : int64_t(0))
        .set("optimizer_bytes_per_rank", mem.optimizer)
        .set("parameter_bytes_per_rank", mem.parameters)
        .set("gradient_bytes_per_rank", mem.gradients)
        .set("comm_bytes_sent_rank0", s.comm->bytes_sent())
        .set("comm_backend", s.comm->name())
        .set("device", s.device.name())
        .set("input_transfer", s.timing_attrs.input_transfer)
        .set("host", w.host)
        .set("final_loss", st.logged_loss)
        .set("timing_log_overhead_fraction", t.log_overhead_seconds / std::max(1e-9, t.run_seconds))
        .set("resumed_from", resumed_from)
        .set("extended_from_step", extended_from)
        .set("epoch_seconds", t.epoch_seconds)
        .set("teacher_cache_hits", cache_hits)
        .set("teacher_cache_filled", cache ? cache->filled() : int64_t(0))
        .set("teacher_cache_kind", views ? std::string("views") : cache ? std::string("logits") : std::string("off"))
        .set("teacher_cache_read_seconds", cache_read_seconds)
        .set("teacher_cache_bytes", views ? views->file_bytes() : int64_t(0))
        .set("skipped_steps", st.bad_steps)
        .set("test_top1_per_epoch", st.top1_per_epoch)
        .set("threads_per_rank", s.plan.threads)
        .set("libtorch", libtorch_version())
        .set("vitkd_version", std::string(VITKD_VERSION))
        .set("finished_utc", utc_minute_now())
        .set("compute", s.precision.compute)
        .set("compute_requested", s.precision.requested)
        .set("compute_reason", s.precision.why)
        .set("reduce", s.precision.reduce)
        .set("gather", s.precision.gather)
        .set("all_gather_bytes_per_step", s.opt->all_gather_bytes())
        .set("bf16_over_fp32_gemm", s.precision.bf16_over_fp32)
        .set("mfu", mfu > 1 ? NAN : mfu)
        .set("gemm_flops_per_core", s.gemm_ceiling)
        .set("gemm_ceiling_source", s.gemm_ceiling_source)
        .set("achieved_flops_per_core", achieved)
        .set("data_io", data_io)
        .set("data_io_mpio_ranks", mpio_ranks);
    r.set("phase_seconds_rank0", t.phase_seconds)  // in the order of phase_names (timing.h5's phases)
        .set("phase_names", std::vector<std::string>(kPhaseNames.begin(), kPhaseNames.end()));
    r.set("seed", s.run.seed).set("config", s.config_text);  // the recipe, for analysis/lift.py's checks
    if (t.agreement)
      r.set("teacher_agreement", t.agreement->agreement)
          .set("teacher_kl", t.agreement->kl)
          .set("teacher_kl_tau", t.agreement->kl_tau)
          .set("teacher_test_top1", t.agreement->teacher_top1);
    if (val) r.set("val_top1", st.test_top1);
    if (t.test_predictions)
      write_predictions_json(s.run.out_dir + "/test_predictions.json", "test", s.meta.path, *t.test_predictions);
    r.set("evaluations", evaluations_json(st.evaluations, s.plan.eval_split))
        .set("time_to_accuracy", time_to_accuracy_json(st.evaluations, s.report.accuracy_thresholds));
    r.write(s.run.out_dir + "/result.json");
  }
  if (val)
    log0("done: %lld steps, %lld epochs, val top-1 %.4f, test top-1 %.4f, %.0f img/s, %.1f s -> %s/result.json\n",
         (long long)st.step, (long long)st.epochs_done, st.test_top1,
         t.test_predictions ? t.test_predictions->top1() : -1.0, ips, train_seconds, s.run.out_dir.c_str());
  else
    log0("done: %lld steps, %lld epochs, test top-1 %.4f, %.0f img/s, %.1f s -> %s/result.json\n",
         (long long)st.step, (long long)st.epochs_done, st.test_top1, ips, train_seconds,
         s.run.out_dir.c_str());
}

}  // namespace vitkd
