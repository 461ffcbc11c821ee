#include "train/profile.hpp"

#include <cstdio>
#include <exception>

#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

StepProfiler::StepProfiler(const ProfileSpec& spec, const std::string& out_dir, int rank)
    : steps_(spec.steps), from_(spec.from_step), path_(out_dir + "/profile-rank" + std::to_string(rank) + ".json") {}

StepProfiler::~StepProfiler() {
  try {
    finish();
    if (steps_ > 0 && !ended_ && std::uncaught_exceptions() == 0)
      log0("profile: no step profiled: this run's steps ended before train.profile_from_step = %lld\n",
           (long long)from_);
  } catch (...) {  // a destructor does not throw; the run's own error is the one to report
  }
}

void StepProfiler::before_step(int64_t next_step) {
  if (steps_ == 0 || ended_ || guard_ || next_step < from_) return;
  out_ = std::make_unique<std::ofstream>(path_ + ".tmp");
  VK_CHECK(FILE, static_cast<bool>(*out_));
  first_ = next_step;
  guard_ = std::make_unique<torch::autograd::profiler::RecordProfile>(*out_);
}

void StepProfiler::after_step(bool trained, bool more) {
  if (!guard_) return;
  if (trained) ++done_;
  if (done_ >= steps_ || !more) finish();
}

void StepProfiler::finish() {
  if (!guard_) return;
  guard_.reset();  // stops the profiler and writes the trace
  if (done_ == 0) {  // the epoch had no step left: the next step starts the profile again
    out_.reset();
    std::remove((path_ + ".tmp").c_str());
    return;
  }
  ended_ = true;
  out_->flush();
  VK_CHECK(FILE, static_cast<bool>(*out_));
  out_.reset();
  atomic_replace(path_, path_ + ".tmp");
  log0("profile: %lld of %lld step(s) from step %lld in %s (one profile-rank<R>.json per rank); "
       "per operator: python3 analysis/profile_ops.py %s\n",
       (long long)done_, (long long)steps_, (long long)first_, path_.c_str(), path_.c_str());
}

}  // namespace vitkd
