#pragma once
// What a training run tells the user: the progress line every
// train.log_every_steps, and at the end the closing line and
// out_dir/result.json (its keys are an interface: add, never rename).
#include <optional>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "distill/targets.hpp"
#include "io/json.hpp"
#include "train/evaluate.hpp"
#include "train/run_state.hpp"
#include "util/timing.hpp"

namespace vitkd {

struct TrainPlan;
struct TrainSetup;

/// What the report reads beyond the run's state and components (the mode,
/// the split and sifting are the plan's, the directory and seed RunSpec's).
/// Built by report_spec() in train/setup.cpp.
struct ReportSpec {
  /// Test top-1 levels, each in (0, 1], whose first crossing result.json's
  /// time_to_accuracy reports (train.accuracy_thresholds).
  std::vector<double> accuracy_thresholds;
};

/// "1h02m" or "3m05s".
std::string fmt_duration(double seconds);

/// Collective: the global mean loss of the window into state.logged_loss,
/// rank 0 prints the progress line, the window restarts. `seen_at_start`:
/// samples seen when this run started; `elapsed`: this run's training time.
void log_progress(const TrainPlan& plan, RunState& state, int64_t epoch, int64_t seen_at_start,
                  double elapsed);

/// Collective, at the end of the loop: the global mean loss of the steps
/// since the last progress line, if any, becomes state.logged_loss.
void close_loss_window(RunState& state);

/// This run's timing, for result.json.
struct RunTiming {
  double run_seconds = 0;             ///< training wall time of this run (evaluations included)
  double eval_seconds = 0;            ///< of which evaluation (slowest rank)
  double log_overhead_seconds = 0;    ///< timing-log writes (slowest rank)
  int64_t trained_at_start = 0;       ///< samples trained before this run (resumed)
  std::vector<double> epoch_seconds;  ///< wall time of each epoch of this run, evaluation excluded
  std::vector<double> phase_seconds;  ///< rank 0's seconds per Phase
  /// distill.eval_agreement: the student's test agreement with the teacher,
  /// its KL to it and the teacher's own top-1 (train/evaluate.hpp); empty when not measured.
  std::optional<TeacherAgreement> agreement;
  /// train.final_eval: the final model's one pass over the test split
  /// (test_predictions.json; result.json test_top1 when data.eval_split = "val").
  std::optional<SplitPredictions> test_predictions;
};

/// For each of `thresholds`, the index in `evals` of the first evaluation
/// whose test top-1 is at or above it, or -1 when none is.
std::vector<int64_t> first_reaching(const std::vector<EvalRecord>& evals,
                                    const std::vector<double>& thresholds);

/// result.json's `evaluations` (one object per evaluation) and
/// `time_to_accuracy` (one per threshold: the first evaluation reaching it,
/// null fields when none did).
std::vector<JsonObject> evaluations_json(const std::vector<EvalRecord>& evals);
/// The same with each evaluation's top-1 under `<split>_top1` (test_top1 or val_top1).
std::vector<JsonObject> evaluations_json(const std::vector<EvalRecord>& evals, EvalSplit split);

/// Rank 0: writes `path` as JSON: {"split", "dataset", "top1", "labels", "predictions"}
/// (per sample of the split, in the file's order).
void write_predictions_json(const std::string& path, const std::string& split, const std::string& dataset,
                            const SplitPredictions& p);
std::vector<JsonObject> time_to_accuracy_json(const std::vector<EvalRecord>& evals,
                                              const std::vector<double>& thresholds);

/// Collective: sums the per-rank counters; rank 0 writes out_dir/result.json
/// (setup.run.out_dir; time_to_accuracy at setup.report's thresholds) and
/// prints the closing line. `targets` is null in teacher mode.
/// `extended_from`: the step a finished run was extended from, or -1.
void report_run(TrainSetup& setup, const RunState& state, const RunTiming& timing,
                TeacherTargets* targets, const std::string& resumed_from, int64_t extended_from);

}  // namespace vitkd
