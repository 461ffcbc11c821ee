#include "distill/targets.hpp"

namespace vitkd {

TeacherTargets::TeacherTargets(Teacher& teacher, std::unique_ptr<TeacherCache> cache, ViewCache* views)
    : teacher_(teacher), cache_(std::move(cache)), views_(views) {}

torch::Tensor TeacherTargets::logits(const torch::Tensor& x, const torch::Tensor& index, int64_t epoch,
                                     int64_t& forwards, PhaseTimes* times) {
  torch::Tensor t, fresh_i, fresh_t;
  if (views_) {  // replayed soft targets: no teacher, nothing shared
    if (x.defined() && x.size(0) > 0) {
      ScopedPhase ph(times, Phase::TeacherForward);
      t = views_->targets(epoch, index).to(x.device());
    }
    return t;
  }
  if (x.defined() && x.size(0) > 0) {
    ScopedPhase ph(times, Phase::TeacherForward);
    if (cache_) t = cache_->lookup(index);  // host memory
    if (t.defined()) t = t.to(x.device());
    if (!t.defined()) {
      t = teacher_.logits(x);
      forwards += x.size(0);
      fresh_i = index;
      fresh_t = t;
    }
  }
  if (cache_) cache_->share(fresh_i, fresh_t);
  return t;
}

}  // namespace vitkd
