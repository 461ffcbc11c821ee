#pragma once
// The teacher's targets for a training step, from one place: the teacher-view
// cache (distill/view_cache.hpp: soft targets of replayed views, never the
// teacher) when there is one; else the teacher-logit cache
// (distill/teacher_cache.hpp) when it holds every row asked for, the teacher
// itself otherwise. Freshly computed rows go into every rank's logit cache.
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "distill/teacher.hpp"
#include "distill/teacher_cache.hpp"
#include "distill/view_cache.hpp"
#include "util/timing.hpp"

namespace vitkd {

class TeacherTargets {
 public:
  /// `cache` may be null (distill.teacher_cache = false), `views` too (no
  /// teacher-view cache; not owned).
  TeacherTargets(Teacher& teacher, std::unique_ptr<TeacherCache> cache, ViewCache* views = nullptr);

  /// Targets float32 [n, K] of the samples `index` (int64 [n]) of `epoch`
  /// whose inputs are `x` [n, C, H, W]: logits, or with a view cache the soft
  /// targets softmax(t/tau) (DistillSpec::teacher_probs); n may be 0 (then `x`
  /// may be undefined and the result is undefined). Adds the samples the
  /// teacher ran on to `forwards`; times the lookup and the teacher into
  /// Phase::TeacherForward. Collective when the logit cache is on: every rank
  /// calls it at the same point of the step.
  torch::Tensor logits(const torch::Tensor& x, const torch::Tensor& index, int64_t epoch, int64_t& forwards,
                       PhaseTimes* times);

  Teacher& teacher() { return teacher_; }
  /// The cache, or null.
  TeacherCache* cache() { return cache_.get(); }
  /// The teacher-view cache, or null.
  ViewCache* views() { return views_; }

 private:
  Teacher& teacher_;
  std::unique_ptr<TeacherCache> cache_;
  ViewCache* views_ = nullptr;
};

}  // namespace vitkd
