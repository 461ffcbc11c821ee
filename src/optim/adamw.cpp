#include "optim/adamw.hpp"

#include <Kokkos_Core.hpp>
#include <cmath>
#include <stdexcept>

namespace vitkd {

using Host = Kokkos::DefaultHostExecutionSpace;
using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
using FloatView = Kokkos::View<float*, Kokkos::HostSpace>;
using CView = Kokkos::View<const float*, Kokkos::HostSpace, Unmanaged>;
using MView = Kokkos::View<float*, Kokkos::HostSpace, Unmanaged>;

/// The moments: labelled Kokkos views for the host kernel (the tensors view
/// their memory), tensors on the device otherwise.
struct AdamW::State {
  FloatView km, kv;
  torch::Tensor m, v;
};

namespace {

/// The update's constants for step `t` (1-based), shared by both kernels.
struct AdamWConsts {
  float b1, b2, eps, lr, decay, c1, c2;
  AdamWConsts(const AdamWHyper& h, int64_t t)
      : b1(float(h.beta1)), b2(float(h.beta2)), eps(float(h.eps)), lr(float(h.lr)),
        decay(float(h.lr * h.weight_decay)),
        c1(float(1.0 / (1.0 - std::pow(h.beta1, double(t))))),
        c2(float(1.0 / std::sqrt(1.0 - std::pow(h.beta2, double(t))))) {}
};

torch::Tensor view_of(FloatView& v) {
  return torch::from_blob(v.data(), {static_cast<int64_t>(v.extent(0))}, torch::kFloat32);
}

}  // namespace

AdamW::AdamW(Shard shard, torch::Device device, AdamWKernel kernel)
    : shard_(shard), st_(std::make_unique<State>()) {
  if (kernel == AdamWKernel::Kokkos && !device.is_cpu())
    throw std::invalid_argument("AdamW: the Kokkos kernel needs host memory");
  kokkos_ = kernel == AdamWKernel::Kokkos || (kernel == AdamWKernel::Auto && device.is_cpu());
  if (kokkos_) {
    st_->km = FloatView("AdamW::m", shard.size);  // zero-initialised
    st_->kv = FloatView("AdamW::v", shard.size);
    st_->m = view_of(st_->km);
    st_->v = view_of(st_->kv);
  } else {
    const auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    st_->m = torch::zeros({shard.size}, opt);
    st_->v = torch::zeros({shard.size}, opt);
  }
}
AdamW::~AdamW() = default;

torch::Tensor AdamW::m() const { return st_->m; }
torch::Tensor AdamW::v() const { return st_->v; }

double AdamW::grad_sq_norm(const torch::Tensor& grad) const {
  if (!kokkos_) return grad.to(torch::kFloat64).square().sum().item<double>();
  CView g(grad.data_ptr<float>(), shard_.size);
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "AdamW::grad_sq_norm", Kokkos::RangePolicy<Host>(0, shard_.size),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(g(i)) * double(g(i)); }, sum);
  return sum;
}

void AdamW::step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask,
                 float grad_scale, const AdamWHyper& h) {
  ++steps_;
  const AdamWConsts k(h, steps_);
  if (!kokkos_) {
    // The kernel below, one element-wise operation at a time.
    torch::NoGradGuard ng;
    const torch::Tensor g = grad * grad_scale;
    torch::Tensor& m = st_->m;
    torch::Tensor& v = st_->v;
    m.mul_(k.b1).add_(g * (1.f - k.b1));
    v.mul_(k.b2).add_(g * (1.f - k.b2) * g);
    param.mul_(1.f - k.decay * mask);
    param.sub_(k.lr * (m * k.c1) / (v.sqrt() * k.c2 + k.eps));
    return;
  }
  MView p(param.data_ptr<float>(), shard_.size);
  CView g(grad.data_ptr<float>(), shard_.size), wd(mask.data_ptr<float>(), shard_.size);
  auto m = st_->km, v = st_->kv;
  const float b1 = k.b1, b2 = k.b2, eps = k.eps, lr = k.lr, decay = k.decay, c1 = k.c1, c2 = k.c2;
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
