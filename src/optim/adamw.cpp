#include "optim/adamw.hpp"

#include <Kokkos_Core.hpp>
#include <cmath>

namespace vitkd {

using Host = Kokkos::DefaultHostExecutionSpace;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using FloatView = Kokkos::View<float*, Kokkos::HostSpace>;
using CView = Kokkos::View<const float*, Kokkos::HostSpace, Unmanaged>;
using MView = Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>;

struct AdamW::State {
  FloatView m, v;
};

AdamW::AdamW(Shard shard) : shard_(shard), st_(std::make_unique<State>()) {
  st_->m = FloatView("AdamW::m", shard.size);  // zero-initialised
  st_->v = FloatView("AdamW::v", shard.size);
}
AdamW::~AdamW() = default;

float* AdamW::m() { return st_->m.data(); }
float* AdamW::v() { return st_->v.data(); }

double AdamW::grad_sq_norm(const float* grad) const {
  CView g(grad, shard_.size);
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "AdamW::grad_sq_norm", Kokkos::RangePolicy<Host>(0, shard_.size),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(g(i)) * double(g(i)); }, sum);
  return sum;
}

void AdamW::step(float* param, const float* grad, const float* mask, float grad_scale,
                 const AdamWHyper& h) {
  ++steps_;
  MView p(param, shard_.size);
  CView g(grad, shard_.size), wd(mask, shard_.size);
  auto m = st_->m, v = st_->v;
  const float b1 = float(h.beta1), b2 = float(h.beta2), eps = float(h.eps);
  const float lr = float(h.lr), decay = float(h.lr * h.weight_decay);
  const float c1 = float(1.0 / (1.0 - std::pow(h.beta1, double(steps_))));
  const float c2 = float(1.0 / std::sqrt(1.0 - std::pow(h.beta2, double(steps_))));
  Kokkos::parallel_for(
      "AdamW::step", Kokkos::RangePolicy<Host>(0, shard_.size), KOKKOS_LAMBDA(const int64_t i) {
        const float gi = g(i) * grad_scale;
        const float mi = b1 * m(i) + (1.f - b1) * gi;
        const float vi = b2 * v(i) + (1.f - b2) * gi * gi;
        m(i) = mi;
        v(i) = vi;
        // Decoupled weight decay (Loshchilov & Hutter), then the Adam update.
        float pi = p(i) * (1.f - decay * wd(i));
        pi -= lr * (mi * c1) / (std::sqrt(vi) * c2 + eps);
        p(i) = pi;
      });
  Kokkos::fence();
}

double schedule_lr(double seen, double warmup, double total, double peak, double floor) {
  if (warmup > 0 && seen < warmup) return peak * seen / warmup;
  const double span = std::max(1.0, total - warmup);
  const double t = std::min(1.0, std::max(0.0, (seen - warmup) / span));
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * t));
}

}  // namespace vitkd
