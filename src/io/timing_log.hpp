#pragma once
// The per-rank timing log, out_dir/timing.h5 (format "vitkd-timing", v1),
// written collectively with parallel HDF5. Layout (read by analysis/report.py):
//   /step_seconds        float64 [steps, ranks, phases]  attribute "phases": names
//   /step_wall_seconds   float64 [steps, ranks]          whole step, per rank
//   /cpu_user_seconds    float64 [steps, ranks]          getrusage deltas per step
//   /cpu_system_seconds  float64 [steps, ranks]
//   /input_bytes         int64 [steps, ranks]            bytes of the training inputs the
//                                                        rank's host made for the step (input
//                                                        and targets; what crosses to a GPU)
//   /metrics/{step, epoch, samples_seen, samples_trained, teacher_forwards}  int64 [steps]
//   /metrics/{loss, lr, kept_fraction, images_per_second}                    float64 [steps]
//   /eval/{step, epoch} int64 [n], /eval/test_top1 float64 [n]
//   root attributes: format, format_version, world_size, hostnames, mode, model,
//   parameters, teacher_parameters, flops_per_sample, bytes_per_rank,
//   gemm_bf16_flops_per_core (the MFU ceiling, in `compute`'s precision despite
//   its name, kept for older readers), gemm_flops_per_core (the same value),
//   input_transfer ("float32" | "uint8": data.transfer as resolved),
//   compute ("bf16" | "fp32": the precision the run computed in; after a resume
//   in another precision, that of the run that appended last, as are the two
//   gemm ceilings), threads_per_rank, all_gather_bytes (this rank's bytes handed to
//   the parameters' all-gathers per step; as compute, the last run's)
// Rows are buffered and appended every `flush_every` steps: the datasets are
// extended collectively, each rank writes its own [k, 1, phases] hyperslab,
// rank 0 writes the metrics.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "io/h5.hpp"
#include "util/timing.hpp"

namespace vitkd {

constexpr H5Format kTimingH5{"vitkd-timing", 1, "timing log",
                             "point at the timing.h5 that vitkd train writes in run.out_dir"};

struct TimingLogAttrs {
  RunMode mode = RunMode::Teacher;
  std::string model;
  int64_t parameters = 0, teacher_parameters = 0, bytes_per_rank = 0, threads_per_rank = 1;
  /// gemm_bf16_flops_per_core: the MFU ceiling (matrix-product FLOP/s per
  /// core) in the precision `compute` names.
  double flops_per_sample = 0, gemm_bf16_flops_per_core = 0;
  Precision compute = Precision::Bf16;  ///< the precision the run computes in: Bf16 | Fp32
  EvalSplit eval_split = EvalSplit::Test;  ///< the split of /eval/test_top1 (data.eval_split)
  InputTransfer input_transfer = InputTransfer::Float32;  ///< data.transfer as resolved: Float32 | Uint8
  /// Bytes of this rank's blocks handed to the parameters' all-gathers per
  /// step (ZeRO-1; half the fp32 figure, plus the fp32 norms, with
  /// precision.gather = bf16; 0 unsharded).
  int64_t all_gather_bytes = 0;
};

/// One step's global metrics (the same on every rank; counters summed over ranks).
struct StepMetrics {
  int64_t step = 0, epoch = 0, samples_seen = 0, samples_trained = 0, teacher_forwards = 0;
  double loss = 0, lr = 0, kept_fraction = 1, images_per_second = 0;
};

class TimingLog {
 public:
  /// Collective: creates `path` (truncating it). A resumed run passes the
  /// checkpoint's step as `resume_step`: an existing log written at the same
  /// rank count keeps its rows up to that step and is appended to; a log that
  /// cannot be appended to is moved to `path`.prev and a new one started.
  TimingLog(const std::string& path, const TimingLogAttrs& attrs, int64_t flush_every,
            int64_t resume_step = -1);
  ~TimingLog();
  /// Records one step: this rank's phase times, wall time and input bytes,
  /// plus metrics. CPU times are taken here (getrusage since the previous call).
  void record(const std::array<double, kNumPhases>& phases, double wall, const StepMetrics& m,
              int64_t input_bytes = 0);
  void record_eval(int64_t step, int64_t epoch, double top1);
  /// Collective: appends the buffered rows.
  void flush();
  /// Seconds spent in flush() so far (the log's own overhead).
  double overhead_seconds() const { return overhead_; }

 private:
  void append_rows();
  H5Obj file_;
  int64_t flush_every_, written_ = 0, evals_written_ = 0;
  double overhead_ = 0, last_user_ = 0, last_sys_ = 0;
  std::vector<double> phases_, wall_, user_, sys_;
  std::vector<int64_t> input_bytes_;
  std::vector<StepMetrics> metrics_;
  std::vector<int64_t> eval_step_, eval_epoch_;
  std::vector<double> eval_top1_;
};

}  // namespace vitkd
