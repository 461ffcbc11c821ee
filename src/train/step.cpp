#include "train/step.hpp"

#include <ATen/record_function.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "comm/world.hpp"
#include "data/tensors.hpp"
#include "distill/loss.hpp"
#include "optim/adamw.hpp"
#include "train/inputs.hpp"
#include "train/setup.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {

StepEngine::StepEngine(const StepSpec& spec, TrainSetup& setup, RunState& state, SamplePool& pool,
                       GlobalSelector& selector, TeacherTargets* targets, PhaseTimes& times)
    : spec_(spec), s_(setup), plan_(setup.plan), st_(state), pool_(pool), selector_(selector),
      targets_(targets), times_(times), faults_(TestFaults::get()) {}

TeacherSource StepEngine::source(bool sifting) const {
  if (!plan_.distilling()) return TeacherSource::None;
  if (!sifting) return TeacherSource::Live;
  if (plan_.sift == SiftScope::Teacher) return TeacherSource::Sifted;
  return plan_.pools_logits() ? TeacherSource::Pooled : TeacherSource::Live;
}

StepOutcome StepEngine::run() {
  RECORD_USER_SCOPE("vitkd::step");  // a step in a profile (train.profile_steps)
  const bool sifting = plan_.sifting_at(st_.step);
  if (sifting && plan_.sift == SiftScope::Sample && plan_.sift_pass == SiftPass::InForward) {
    // Ranked inside the training forward: a step per global batch, its loss
    // on the kept samples; a global batch that keeps nothing makes no step.
    while (fill(false))
      if (train_ranked_in_forward(pool_.size(), source(true))) return StepOutcome::Trained;
    return StepOutcome::EpochEnded;
  }
  if (!sifting || plan_.sift == SiftScope::Teacher) {
    // Plain data parallelism: each step trains on exactly one global batch
    // (with scope "teacher", the rule picks who gets the teacher within it).
    if (!fill(false)) return StepOutcome::EpochEnded;
    if (!sifting) {
      st_.samples_kept += st_.last.global_batch;
      st_.window.kept += st_.last.global_batch;
    }
    train(pool_.size(), st_.last.global_batch, source(sifting));
    return StepOutcome::Trained;
  }
  // Kept samples accumulate until every rank has a full batch; all ranks
  // decide together (an allreduce), so none can wait alone.
  while (allreduce_min(pool_.size()) < plan_.batch)
    if (!fill(true)) {
      // End of the epoch: flush every rank's leftover in one last step.
      const int64_t left = allreduce_sum(pool_.size());
      if (left == 0) return StepOutcome::EpochEnded;
      train(pool_.size(), left, source(true));
      return StepOutcome::TrainedLast;
    }
  train(plan_.batch, plan_.global_batch, source(true));
  return StepOutcome::Trained;
}

torch::Tensor StepEngine::teacher_logits(const torch::Tensor& x, const torch::Tensor& index) {
  return targets_->logits(x, index, st_.data_epoch, st_.teacher_forwards, &times_);
}

// The sifting rule on this rank's samples `indices` with losses `losses` [n]
// (n may be 0): the local rows kept. Collective.
std::vector<int64_t> StepEngine::select(const std::vector<int64_t>& indices, torch::Tensor losses,
                                        int64_t epoch, int64_t* kept_global) {
  // Test-only fault injection: VITKD_TEST_SIFT_ZERO_LOSS_RANK=r gives rank r
  // zero losses, so it keeps (almost) nothing for many batches.
  if (faults_.sift_zero_rank == world().rank && !indices.empty()) losses = torch::zeros_like(losses);
  GlobalSelector::Decision d = selector_.select(indices, losses, epoch);
  st_.window.kept += d.kept_global;
  st_.samples_kept += d.kept_global;
  if (kept_global) *kept_global = d.kept_global;
  return std::move(d.rows);
}

// Reads one batch into the pool, sifted or whole; false at the end of the epoch.
bool StepEngine::fill(bool sifting) {
  std::optional<Batch> b;
  torch::Tensor x, y;
  {
    ScopedPhase ph(times_, Phase::DataWait);
    b = s_.train->next();
    if (!b) return false;
    // The transform (with a teacher-view cache, its views replayed), the
    // batch on the compute device; the sample indices stay on the host.
    int64_t bytes = 0;
    TrainInputs in = device_inputs(s_, *b, &bytes);
    st_.input_bytes += bytes;
    x = std::move(in.x);
    y = std::move(in.y);
    if (faults_.corrupt(st_.step) && world().rank == 0) x.fill_(NAN);  // test-only: a corrupt batch
  }
  st_.data_batch = b->step + 1;
  auto idx_t = torch::tensor(b->indices, torch::kLong);
  st_.samples_seen += b->global_size;
  st_.window.seen += b->global_size;
  st_.last.global_batch = b->global_size;
  if (!sifting) {
    pool_.add(x, y, torch::Tensor(), idx_t);
    return true;
  }
  // Selection pass (no grad): per-sample losses of every rank's samples.
  torch::Tensor per, t_logits;
  const int64_t n = b->size();
  const bool kd = plan_.pools_logits();
  if (kd) t_logits = teacher_logits(x, idx_t);  // collective with the cache
  if (n > 0) {
    torch::NoGradGuard ng;
    ScopedPhase ph(times_, Phase::SiftForward);
    AutocastBf16 ac(plan_.bf16, plan_.device.type());
    ViTOutput out = s_.student->forward(x);
    per = kd ? distill_loss_per_sample(out, t_logits, y, plan_.distill)
             : cross_entropy_per_sample(out.prediction(), y);
  }
  const std::vector<int64_t> rows = select(b->indices, per, b->epoch);
  if (!rows.empty()) {
    auto sel = torch::tensor(rows, torch::kLong);
    auto sel_dev = sel.to(plan_.device);
    pool_.add(x.index_select(0, sel_dev), y.index_select(0, sel_dev),
              t_logits.defined() ? t_logits.index_select(0, sel_dev) : torch::Tensor(),
              idx_t.index_select(0, sel));
  }
  return true;
}

// Scope "teacher": the loss of `take` (n rows, n may be 0) from the student's
// output `out`, where the rule, ranking the student's CE from this very
// forward pass, picks the rows that get the distillation loss; the others get
// CE on their label. The teacher runs on the kept rows only. With every row
// kept this is exactly the plain distillation loss. Collective (selection,
// teacher cache).
torch::Tensor StepEngine::teacher_sifted_loss(const ViTOutput& out, const PoolTake& take, int64_t n) {
  torch::Tensor ce;
  if (n > 0) {
    torch::NoGradGuard ng;
    AutocastBf16 ac(plan_.bf16, plan_.device.type());
    ce = teacher_loss_per_sample(out, take.y);
  }
  std::vector<int64_t> rows;
  {
    ScopedPhase ph(times_, Phase::SiftForward);
    std::vector<int64_t> indices(n);
    if (n > 0) {
      const auto ic = take.i.contiguous();
      std::copy(ic.data_ptr<int64_t>(), ic.data_ptr<int64_t>() + n, indices.begin());
    }
    rows = select(indices, ce, st_.data_epoch);
  }
  const bool every = static_cast<int64_t>(rows.size()) == n;
  const torch::Tensor sel_host = torch::tensor(rows, torch::kLong);
  const torch::Tensor sel = sel_host.to(plan_.device);
  torch::Tensor xk, ik;
  if (n > 0) {
    xk = every ? take.x : take.x.index_select(0, sel);
    ik = every ? take.i : take.i.index_select(0, sel_host);
  }
  const torch::Tensor t = teacher_logits(xk, ik);
  if (n == 0) return torch::Tensor();
  ScopedPhase ph(times_, Phase::StudentForward);
  AutocastBf16 ac(plan_.bf16, plan_.device.type());
  if (every) return distill_loss_per_sample(out, t, take.y, plan_.distill).mean();
  torch::Tensor per = teacher_loss_per_sample(out, take.y, plan_.distill.label_smoothing);
  if (!rows.empty()) {
    ViTOutput kept{out.logits.index_select(0, sel),
                   out.dist_logits.defined() ? out.dist_logits.index_select(0, sel) : torch::Tensor()};
    per = per.index_copy(0, sel, distill_loss_per_sample(kept, t, take.y.index_select(0, sel), plan_.distill));
  }
  return per.mean();
}

// One optimizer step on `n` pooled samples of a global step of `global_n`.
void StepEngine::train(int64_t n, int64_t global_n, TeacherSource source) {
  PoolTake take = pool_.take(n);
  const double weight = global_n > 0 ? double(n) * world().size / double(global_n) : 0.0;
  if (source == TeacherSource::Live) {
    auto t = teacher_logits(take.x, take.i);
    if (n > 0) take.t = t;
  }
  const ViTOutput out = student_forward(take, n);
  torch::Tensor loss;
  if (source == TeacherSource::Sifted) {
    loss = teacher_sifted_loss(out, take, n);  // collective, also with n == 0
  } else if (n > 0) {
    ScopedPhase ph(times_, Phase::StudentForward);
    AutocastBf16 ac(plan_.bf16, plan_.device.type());
    auto per = source == TeacherSource::None ? teacher_loss_per_sample(out, take.y, plan_.distill.label_smoothing)
                                             : distill_loss_per_sample(out, take.t, take.y, plan_.distill);
    loss = per.mean();
  }
  optimize(loss, weight, n, global_n);
}

// The student's training forward on `take` (n rows; nothing when n == 0).
ViTOutput StepEngine::student_forward(const PoolTake& take, int64_t n) {
  ViTOutput out;
  if (n == 0) return out;
  ScopedPhase ph(times_, Phase::StudentForward);
  // Test-only fault injection (util/test_faults.hpp): a straggler rank.
  if (faults_.slow_rank == world().rank) std::this_thread::sleep_for(std::chrono::milliseconds(faults_.slow_ms));
  AutocastBf16 ac(plan_.bf16, plan_.device.type());
  // Stochastic depth: each sample's kept branches follow from its index
  // and the epoch (model/drop_path.hpp), whichever rank trains it.
  const DropPathScales drop = drop_path_scales(plan_.drop_path, s_.spec.depth, st_.data_epoch, take.i, plan_.device);
  return s_.student->forward(take.x, /*all_tokens=*/false, &drop);
}

// Sift scope "sample", pass "in_forward" (Selective Backprop's way): every
// sample of this rank's batch `take` (n rows) goes through the training
// forward; the rule ranks the loss read from it (the criterion's, as the
// separate pass ranks), and only the kept rows carry loss, the teacher
// (criterion "ce") run on them alone. The step's loss is the mean over the
// kept samples of all ranks. False, with no step, when no rank kept any.
// Collective (selection, teacher cache).
bool StepEngine::train_ranked_in_forward(int64_t n, TeacherSource source) {
  PoolTake take = pool_.take(n);
  if (source == TeacherSource::Pooled) {  // criterion kd ranks by the distillation loss: the teacher on all
    auto t = teacher_logits(take.x, take.i);
    if (n > 0) take.t = t;
  }
  const ViTOutput out = student_forward(take, n);
  torch::Tensor rank_by;
  std::vector<int64_t> indices(n);
  int64_t kept_global = 0;
  std::vector<int64_t> rows;
  {
    ScopedPhase ph(times_, Phase::SiftForward);
    if (n > 0) {
      torch::NoGradGuard ng;
      AutocastBf16 ac(plan_.bf16, plan_.device.type());
      rank_by = source == TeacherSource::Pooled ? distill_loss_per_sample(out, take.t, take.y, plan_.distill)
                                                : cross_entropy_per_sample(out.prediction(), take.y);
      const auto ic = take.i.contiguous();
      std::copy(ic.data_ptr<int64_t>(), ic.data_ptr<int64_t>() + n, indices.begin());
    }
    rows = select(indices, rank_by, st_.data_epoch, &kept_global);
  }
  if (kept_global == 0) return false;  // the same on every rank
  const int64_t k = static_cast<int64_t>(rows.size());
  const bool every = k == n;
  const torch::Tensor sel_host = torch::tensor(rows, torch::kLong);
  const torch::Tensor sel = sel_host.to(plan_.device);
  const auto kept = [&](const torch::Tensor& t) { return every || !t.defined() ? t : t.index_select(0, sel); };
  torch::Tensor t;
  if (source == TeacherSource::Live) {  // collective, also with no rows here
    torch::Tensor xk, ik;
    if (n > 0) {
      xk = kept(take.x);
      ik = every ? take.i : take.i.index_select(0, sel_host);
    }
    t = teacher_logits(xk, ik);
  } else if (source == TeacherSource::Pooled && k > 0)
    t = kept(take.t);
  torch::Tensor loss;
  if (k > 0) {
    ScopedPhase ph(times_, Phase::StudentForward);
    AutocastBf16 ac(plan_.bf16, plan_.device.type());
    const ViTOutput ok{kept(out.logits), kept(out.dist_logits)};
    const torch::Tensor y = kept(take.y);
    loss = (source == TeacherSource::None ? teacher_loss_per_sample(ok, y, plan_.distill.label_smoothing)
                                          : distill_loss_per_sample(ok, t, y, plan_.distill))
               .mean();
  }
  optimize(loss, double(k) * world().size / double(kept_global), k, kept_global);
  return true;
}

// Backward of `loss` (this rank's mean over its n samples, undefined when
// n == 0) scaled by `weight`, the gradient reduce-scatter and the sharded
// AdamW update: one optimizer step that trained `global_n` samples.
void StepEngine::optimize(const torch::Tensor& loss, double weight, int64_t n, int64_t global_n) {
  ShardedAdamW& opt = *s_.opt;
  torch::Tensor loss_value;  // float64 [1], on the device
  {
    ScopedPhase ph(times_, Phase::Backward);
    opt.begin_backward();
    if (n > 0) {
      (loss * weight).backward();
      loss_value = loss.detach().to(torch::kFloat64).reshape({1});
    }
  }
  st_.samples_trained += global_n;
  st_.window.trained += global_n;
  st_.last.lr = schedule_lr(double(st_.samples_seen), plan_.warmup_samples, plan_.total_samples,
                            spec_.lr, spec_.min_lr);
  const AdamWHyper h{st_.last.lr, spec_.beta1, spec_.beta2, spec_.eps, spec_.weight_decay};
  const torch::Tensor gnorm = opt.step_async(h, spec_.grad_clip, &times_);
  if (!loss_value.defined()) loss_value = torch::full({1}, NAN, gnorm.options());
  // The loss and the norm reach the run state without a wait on a GPU: one
  // step late there (settle() before reading them), at once on the CPU.
  stats_.push(torch::cat({loss_value, gnorm.reshape({1})}));
  stat_info_.push_back({st_.step + 1, n});
  absorb(stats_.take(false));
  s_.flat->zero_grad();
  ++st_.step;
}

void StepEngine::absorb(const std::vector<std::vector<double>>& values) {
  for (const std::vector<double>& v : values) {
    const StepStat info = stat_info_.front();
    stat_info_.pop_front();
    const double loss = v[0], gnorm = v[1];
    st_.last.loss = info.samples > 0 ? loss : NAN;
    st_.last.samples = info.samples;
    if (info.samples > 0 && std::isfinite(loss)) {
      st_.window.loss_sum += loss * info.samples;
      st_.window.loss_count += info.samples;
    }
    if (!std::isfinite(gnorm)) {  // every rank sees the same global norm and skipped the update
      ++st_.bad_steps;
      ++st_.bad_run;
      log0("step %lld: non-finite loss or gradient (norm %g): update skipped (%lld in a row, "
           "train.max_bad_steps = %lld)\n", (long long)info.step, gnorm, (long long)st_.bad_run,
           (long long)spec_.max_bad_steps);
    } else {
      st_.bad_run = 0;
    }
  }
}

}  // namespace vitkd
