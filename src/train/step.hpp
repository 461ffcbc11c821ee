#pragma once
// One optimizer step of the training loop: read the data it needs, select
// samples when sifting, get the teacher's targets, forward, backward with the
// gradient reduce-scatter, the sharded AdamW update. Every rank runs it in
// lockstep: the collectives inside (sifting's gather, the teacher cache,
// the reduce-scatter, the gradient norm) are reached in the same order on
// every rank, also by a rank that has no samples in a step.
#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "comm/device.hpp"
#include "distill/targets.hpp"
#include "model/vit.hpp"
#include "sift/global_select.hpp"
#include "sift/sample_pool.hpp"
#include "train/run_state.hpp"
#include "util/test_faults.hpp"
#include "util/timing.hpp"

namespace vitkd {

struct TrainPlan;
struct TrainSetup;

/// What an optimizer step does with the gradient (optim.*), and how many
/// non-finite steps in a row end the run. Built by step_spec() in
/// train/setup.cpp; the learning rate's warm-up and length are the plan's
/// (TrainPlan::warmup_samples, total_samples).
struct StepSpec {
  double lr = 0;             ///< peak learning rate, after the warm-up (optim.lr)
  double min_lr = 0;         ///< learning rate at the end of the cosine decay (optim.min_lr)
  double beta1 = 0;          ///< AdamW's first-moment decay per step (optim.beta1)
  double beta2 = 0;          ///< AdamW's second-moment decay per step (optim.beta2)
  double eps = 0;            ///< AdamW's epsilon, added to the root of the second moment (optim.eps)
  double weight_decay = 0;   ///< AdamW's decoupled weight decay, per unit of learning rate (optim.weight_decay)
  double grad_clip = 0;      ///< the global gradient norm is clipped to this (0 = off; optim.grad_clip)
  int64_t max_bad_steps = 0; ///< consecutive steps with a non-finite loss or gradient that stop the run (train.max_bad_steps)
};

/// Where a step's teacher targets come from.
enum class TeacherSource {
  None,    ///< teacher mode: cross-entropy on the labels
  Live,    ///< the teacher (or its cache) runs on the step's samples
  Pooled,  ///< logits computed at selection and pooled with the samples (criterion kd)
  Sifted,  ///< scope "teacher": the rule picks the samples that get the teacher
};

/// What a call of StepEngine::run() did.
enum class StepOutcome {
  Trained,       ///< one optimizer step; the epoch goes on
  TrainedLast,   ///< one optimizer step on the epoch's leftover samples; the epoch is over
  EpochEnded,    ///< no step: the epoch had no data left
};

class StepEngine {
 public:
  /// `targets` is null in teacher mode. Every reference must outlive the engine.
  StepEngine(const StepSpec& spec, TrainSetup& setup, RunState& state, SamplePool& pool,
             GlobalSelector& selector, TeacherTargets* targets, PhaseTimes& times);

  /// One optimizer step of the current epoch (the loader's epoch must have
  /// begun). Collective.
  StepOutcome run();
  /// Brings the steps' loss and gradient norm into the run state (last loss,
  /// loss window, non-finite steps). On the CPU run() does it at once; on a
  /// GPU run() does it for the step before (the host never waits for the
  /// step it has just queued) and settle() for every step so far, waiting:
  /// call it before reading those fields (progress lines, checkpoints, the
  /// end of the run).
  void settle() { absorb(stats_.take(true)); }

 private:
  bool fill(bool sifting);
  void train(int64_t n, int64_t global_n, TeacherSource source);
  bool train_ranked_in_forward(int64_t n, TeacherSource source);
  ViTOutput student_forward(const PoolTake& take, int64_t n);
  void optimize(const torch::Tensor& loss, double weight, int64_t n, int64_t global_n);
  torch::Tensor teacher_sifted_loss(const ViTOutput& out, const PoolTake& take, int64_t n);
  std::vector<int64_t> select(const std::vector<int64_t>& indices, torch::Tensor losses,
                              int64_t epoch, int64_t* kept_global = nullptr);
  torch::Tensor teacher_logits(const torch::Tensor& x, const torch::Tensor& index);
  TeacherSource source(bool sifting) const;
  /// The host side of one step's statistics, in push order.
  struct StepStat {
    int64_t step = 0;     ///< 1-based step number
    int64_t samples = 0;  ///< this rank's samples in the step
  };
  void absorb(const std::vector<std::vector<double>>& values);

  const StepSpec& spec_;
  TrainSetup& s_;
  const TrainPlan& plan_;
  RunState& st_;
  SamplePool& pool_;
  GlobalSelector& selector_;
  TeacherTargets* targets_;
  PhaseTimes& times_;
  const TestFaults& faults_;
  LaggedReadback stats_;            ///< per step: {loss, gradient norm}
  std::deque<StepStat> stat_info_;  ///< the host side of the entries in stats_
};

}  // namespace vitkd
