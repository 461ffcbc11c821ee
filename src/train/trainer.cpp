#include "train/trainer.hpp"

#include <cmath>
#include <csignal>
#include <memory>

#include "comm/device.hpp"
#include "comm/world.hpp"
#include "distill/targets.hpp"
#include "io/timing_log.hpp"
#include "sift/global_select.hpp"
#include "sift/sample_pool.hpp"
#include "train/evaluate.hpp"
#include "train/preempt.hpp"
#include "train/profile.hpp"
#include "train/report.hpp"
#include "train/resume.hpp"
#include "train/run_state.hpp"
#include "train/setup.hpp"
#include "train/step.hpp"
#include "util/error.hpp"
#include "util/test_faults.hpp"
#include "util/timing.hpp"

namespace vitkd {
namespace {

// The step's row of the timing log, and whether any rank was told to stop
// (SIGTERM/SIGUSR1): both travel in the one allreduce a step needs anyway.
bool record_step(TimingLog& tlog, const RunState& st, const PhaseTimes& times, int64_t epoch,
                 double wall, int64_t seen_before, int64_t trained_before, int64_t kept_before,
                 int64_t bytes_before) {
  const TestFaults& faults = TestFaults::get();
  const bool signalled = preemption_signalled() || (world().root() && faults.preempt_step == st.step);
  double v[4] = {std::isfinite(st.last.loss) ? st.last.loss * st.last.samples : 0.0,
                 double(st.last.samples), signalled ? 1.0 : 0.0, double(st.teacher_forwards)};
  allreduce_sum_inplace(v, 4);
  StepMetrics m;
  m.step = st.step;
  m.epoch = epoch;
  m.samples_seen = st.samples_seen;
  m.samples_trained = st.samples_trained;
  m.teacher_forwards = static_cast<int64_t>(v[3]);  // summed over ranks
  m.loss = v[1] > 0 ? v[0] / v[1] : NAN;
  m.lr = st.last.lr;
  m.kept_fraction = st.samples_seen > seen_before
                        ? double(st.samples_kept - kept_before) / double(st.samples_seen - seen_before)
                        : 1.0;
  m.images_per_second = wall > 0 ? double(st.samples_trained - trained_before) / wall : 0.0;
  tlog.record(times.step, wall, m, st.input_bytes - bytes_before);
  return v[2] > 0;
}

// The teacher's targets (distill mode), with the teacher-logit cache loaded
// when distill.teacher_cache is on; null in teacher mode.
std::unique_ptr<TeacherTargets> make_targets(TrainSetup& s) {
  if (!s.plan.distilling()) return nullptr;
  if (s.views) {
    log0("%s\n", s.views->describe().c_str());
    return std::make_unique<TeacherTargets>(*s.teacher, nullptr, s.views.get());
  }
  std::unique_ptr<TeacherCache> cache;
  if (!s.teacher_cache_file.empty()) {  // distill.teacher_cache
    cache = std::make_unique<TeacherCache>(s.meta.train_size, s.meta.num_classes, s.teacher->describe(),
                                           s.meta.path);
    log0("%s\n", cache->load(s.teacher_cache_file).c_str());
  }
  return std::make_unique<TeacherTargets>(*s.teacher, std::move(cache));
}

// Test top-1 of the model as it is now, appended to st.evaluations with the
// step, the samples seen and the training time so far (this run's counted
// from t_train). An evaluation at the step of the last one reuses it: the
// weights are the same.
double evaluate_now(TrainSetup& s, RunState& st, PhaseTimes& times, int64_t epoch,
                    Clock::time_point t_train) {
  if (!st.evaluations.empty() && st.evaluations.back().step == st.step) return st.evaluations.back().test_top1;
  double& eval_total = times.total[static_cast<int>(Phase::Eval)];
  EvalRecord e;
  e.step = st.step;
  e.epoch = epoch;
  e.samples_seen = st.samples_seen;
  e.elapsed_seconds = st.train_seconds + seconds_since(t_train);
  e.train_seconds = e.elapsed_seconds - (st.eval_seconds + eval_total);
  {
    ScopedPhase ph(times, Phase::Eval);
    e.test_top1 = evaluate(s.student, *s.test, s.meta, s.plan.augment, s.plan.bf16);
  }
  times.settle();
  st.evaluations.push_back(e);
  return e.test_top1;
}

// Test top-1 after an epoch: recorded in the state and the timing log.
void evaluate_epoch(TrainSetup& s, RunState& st, TimingLog& tlog, PhaseTimes& times, int64_t epoch,
                    Clock::time_point t_train) {
  st.test_top1 = evaluate_now(s, st, times, epoch, t_train);
  st.top1_per_epoch.push_back(st.test_top1);
  tlog.record_eval(st.step, epoch, st.test_top1);
  log0("epoch %lld: %s top-1 %.4f\n", (long long)epoch + 1, s.test->split_name().c_str(), st.test_top1);
}

[[noreturn]] void abort_bad_steps(const TrainSetup& s, const std::string& diagnostic, int64_t bad_run,
                                  int64_t step) {
  throw RuntimeError(std::to_string(bad_run) + " consecutive steps had a non-finite loss or "
                     "gradient (train.max_bad_steps = " + std::to_string(s.step_spec.max_bad_steps) +
                     "); stopped at step " + std::to_string(step) + " and wrote " + diagnostic +
                     " to inspect (`vitkd inspect`); lower optim.lr, check the data, or resume from " +
                     s.run.out_dir + "/checkpoint.h5", /*collective=*/true);
}

}  // namespace

int train_main(TrainSetup& s) {
  const World& w = world();
  const TrainPlan& plan = s.plan;
  GlobalSelector selector(plan.sift_beta, plan.sift_history, plan.global_batch,
                          static_cast<uint64_t>(s.run.seed),
                          plan.sift && plan.sift_trace ? s.run.out_dir + "/sift_trace.txt"
                                                       : std::string());
  const TestFaults& faults = TestFaults::get();
  install_preemption_handlers();
  PhaseTimes times;
  // On a GPU: CUDA events, so that queued GPU work is charged to the phase
  // that queued it (null on the CPU: host wall-clock time).
  const std::unique_ptr<PhaseMarker> marker = make_phase_marker(s.device);
  times.marker = marker.get();
  SamplePool pool;
  RunState st;
  st.seed = static_cast<uint64_t>(s.run.seed);
  st.global_batch = plan.global_batch;

  // ---- resume ------------------------------------------------------------------
  const std::string resume_from = choose_resume(s.checkpoint, s.run.out_dir, s.student, s.flat->numel);
  int64_t extended_from = -1;
  if (!resume_from.empty()) {
    apply_resume(resume_from, s, st, selector, pool);
    const ResumedSchedule r = check_resumed_schedule(resume_from, s.run.out_dir, plan, st);
    if (r == ResumedSchedule::Finished) return kExitOk;
    if (r == ResumedSchedule::Extended) extended_from = st.step;
  }
  TimingLog tlog(s.run.out_dir + "/timing.h5", s.timing_attrs, s.loop.timing_every_steps,
                 resume_from.empty() ? -1 : st.step);
  log0("setup took %.1f s\n", seconds_since(s.started));
  std::unique_ptr<TeacherTargets> targets = make_targets(s);
  TeacherCache* cache = targets ? targets->cache() : nullptr;
  StepEngine engine(s.step_spec, s, st, pool, selector, targets.get(), times);
  StepProfiler profiler(s.profile, s.run.out_dir, w.rank);  // train.profile_steps

  // ---- loop ------------------------------------------------------------------
  const int64_t seen_at_start = st.samples_seen;
  RunTiming timing;
  timing.trained_at_start = st.samples_trained;
  const auto t_train = Clock::now();
  st.window.reset();
  bool stop = st.step >= plan.total_steps;  // e.g. preempted right after the last step
  s.student->train();
  const int64_t start_epoch = st.data_epoch;
  for (int64_t epoch = start_epoch; epoch < plan.epochs && !stop; ++epoch) {
    st.data_epoch = epoch;
    if (epoch != start_epoch) st.data_batch = 0;
    const auto t_epoch = Clock::now();
    const double eval_before = times.total[static_cast<int>(Phase::Eval)];
    s.train->begin_epoch(epoch, st.data_batch);
    for (StepOutcome outcome = StepOutcome::Trained; outcome == StepOutcome::Trained;) {
      if (faults.kill_rank == w.rank && faults.kill_step == st.step) std::raise(SIGKILL);  // test-only
      profiler.before_step(st.step + 1);
      times.next_step();
      const auto t_step = Clock::now();
      const int64_t seen_before = st.samples_seen, trained_before = st.samples_trained,
                    kept_before = st.samples_kept, bytes_before = st.input_bytes;
      outcome = engine.run();
      if (outcome == StepOutcome::EpochEnded) {
        profiler.after_step(false, false);
        break;
      }
      // A GPU's phase times of the step before: reading them never waits for
      // the work just queued (this step's are read at the next step).
      times.settle_lagged();
      // Likewise its loss and gradient norm (StepEngine::settle): read whole
      // where a progress line, a checkpoint or the end needs them.
      if (st.step % s.loop.log_every_steps == 0 || st.step >= plan.total_steps ||
          (s.checkpoint.every_steps > 0 && st.step % s.checkpoint.every_steps == 0))
        engine.settle();
      const bool preempt = record_step(tlog, st, times, epoch, seconds_since(t_step), seen_before,
                                       trained_before, kept_before, bytes_before);
      // The profile goes on while the next step is one of this epoch's and this run's.
      profiler.after_step(true, outcome == StepOutcome::Trained && st.data_batch < plan.steps_per_epoch &&
                                    st.step < plan.total_steps && !preempt);
      if (st.step % s.loop.log_every_steps == 0)
        log_progress(plan, st, epoch, seen_at_start, seconds_since(t_train));
      if (st.bad_run >= s.step_spec.max_bad_steps) engine.settle();  // the diagnostic checkpoint: every step
      if (st.bad_run >= s.step_spec.max_bad_steps)
        abort_bad_steps(s, write_run_checkpoint(CheckpointKind::Diagnostic, s, st, selector, pool,
                                                seconds_since(t_train), times),
                        st.bad_run, st.step);
      if (s.loop.eval_every_steps > 0 && st.step % s.loop.eval_every_steps == 0)
        log0("step %lld: %s top-1 %.4f\n", (long long)st.step, s.test->split_name().c_str(),
             evaluate_now(s, st, times, epoch, t_train));
      if (preempt) {
        engine.settle();
        write_run_checkpoint(CheckpointKind::Preempted, s, st, selector, pool, seconds_since(t_train), times);
        if (cache && w.root()) cache->save(s.teacher_cache_file);
        tlog.flush();
        log0("preempted (SIGTERM/SIGUSR1) after step %lld: wrote %s/checkpoint.h5; exiting with "
             "code %d so that the job is requeued; the next run resumes from it\n",
             (long long)st.step, s.run.out_dir.c_str(), int(kExitPreempted));
        return kExitPreempted;
      }
      if (st.step >= plan.total_steps) {
        stop = true;
        break;
      }
      // No periodic checkpoint inside a run of non-finite steps: checkpoint.h5
      // stays at the last step that trained normally.
      if (s.checkpoint.every_steps > 0 && st.step % s.checkpoint.every_steps == 0 && st.bad_run == 0)
        write_run_checkpoint(CheckpointKind::Periodic, s, st, selector, pool, seconds_since(t_train), times);
    }
    st.epochs_done = epoch + 1;
    if (!stop || st.data_batch >= plan.steps_per_epoch) {  // the cursor moves past a finished epoch
      st.data_epoch = epoch + 1;
      st.data_batch = 0;
    }
    // Evaluation excluded (train.eval_every_steps evaluates within the epoch).
    timing.epoch_seconds.push_back(seconds_since(t_epoch) -
                                   (times.total[static_cast<int>(Phase::Eval)] - eval_before));
    const bool last = (stop || epoch + 1 == plan.epochs) && s.loop.final_eval;
    if (last || (s.loop.eval_every_epochs > 0 && (epoch + 1) % s.loop.eval_every_epochs == 0))
      evaluate_epoch(s, st, tlog, times, epoch, t_train);
  }
  engine.settle();
  close_loss_window(st);
  tlog.flush();
  if (cache && w.root() && cache->save(s.teacher_cache_file))
    log0("teacher cache: %lld of %lld samples' logits saved to %s\n", (long long)cache->filled(),
         (long long)cache->size(), s.teacher_cache_file.c_str());

  // ---- report ----------------------------------------------------------------
  timing.log_overhead_seconds = allreduce_max(tlog.overhead_seconds());
  timing.run_seconds = seconds_since(t_train);
  timing.eval_seconds = allreduce_max(times.total[static_cast<int>(Phase::Eval)]);
  write_run_checkpoint(CheckpointKind::Final, s, st, selector, pool, seconds_since(t_train), times);
  times.settle();
  timing.phase_seconds.assign(times.total.begin(), times.total.end());
  if (s.loop.final_eval) {  // the final model's one pass over the test split, per sample
    SplitPredictions p;
    evaluate(s.student, s.test_split(), s.meta, plan.augment, plan.bf16, &p);
    timing.test_predictions = std::move(p);
  }
  if (plan.distilling() && s.loop.eval_agreement) {
    const TeacherAgreement a =
        teacher_agreement(s.student, *s.teacher, s.test_split(), s.meta, plan.augment, plan.bf16, plan.distill.temperature);
    timing.agreement = a;
    log0("test agreement with the teacher %.4f, KL to the teacher %.4f nats (%.4f at temperature %g); "
         "the teacher's own test top-1 %.4f\n", a.agreement, a.kl, a.kl_tau, plan.distill.temperature,
         a.teacher_top1);
  }
  report_run(s, st, timing, targets.get(), resume_from, extended_from);
  return kExitOk;
}

}  // namespace vitkd
