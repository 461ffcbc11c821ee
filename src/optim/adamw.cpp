#include "optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#ifdef VITKD_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "optim/adamw_kernels.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {

/// The moments m and v (float32 tensors on the buffers' device; the Kokkos
/// kernels work on their memory), and the device's count of updates.
struct AdamW::State {
  torch::Tensor m, v;
  torch::Tensor t;  ///< device implementations: updates applied, float32 0-dim on the device
  /// LibTorch's fused kernel: the shard's runs of equal decay mask (element
  /// ranges {offset, size} with weight decay, and without), found at the
  /// first step (the mask is the same in every step).
  std::vector<Shard> decay_runs, plain_runs;
  bool runs_known = false;
};

namespace {

/// The host kernel's constants for step `t` (1-based).
adamw_kernels::Consts consts(const AdamWHyper& h, int64_t t) {
  return adamw_kernels::consts_of_update(h.beta1, h.beta2, float(h.eps), float(h.lr), float(h.lr * h.weight_decay),
                                         double(t));
}

#ifdef VITKD_TORCH_CUDA
void* stream_of(const torch::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#else
void* stream_of(const torch::Tensor&) { return nullptr; }
#endif

}  // namespace

AdamW::AdamW(Shard shard, torch::Device device, AdamWKernel kernel)
    : shard_(shard), st_(std::make_unique<State>()) {
  if (kernel == AdamWKernel::Kokkos && !device.is_cpu())
    throw std::invalid_argument("AdamW: the Kokkos host kernel needs host memory");
  if (kernel == AdamWKernel::KokkosDevice && !(device.is_cuda() && adamw_kernels::device_built()))
    throw std::invalid_argument("AdamW: the Kokkos device kernel needs CUDA memory and a Kokkos with CUDA");
  kokkos_ = kernel == AdamWKernel::Kokkos || (kernel == AdamWKernel::Auto && device.is_cpu());
  device_kokkos_ = kernel == AdamWKernel::KokkosDevice ||
                   (kernel == AdamWKernel::Auto && device.is_cuda() && adamw_kernels::device_built());
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  st_->m = torch::zeros({shard.size}, opt);
  st_->v = torch::zeros({shard.size}, opt);
  if (!kokkos_) st_->t = torch::zeros({}, opt);
}
AdamW::~AdamW() = default;

bool AdamW::kokkos_device_built() { return adamw_kernels::device_built(); }

torch::Tensor AdamW::m() const { return st_->m; }
torch::Tensor AdamW::v() const { return st_->v; }

int64_t AdamW::steps() const { return kokkos_ ? steps_ : static_cast<int64_t>(st_->t.item<float>()); }
void AdamW::set_steps(int64_t s) {
  steps_ = s;
  if (!kokkos_) st_->t.fill_(static_cast<double>(s));  // exact below 2^24 updates
}

StepGate clip_gate(const torch::Tensor& norm, double clip) {
  torch::NoGradGuard ng;
  StepGate g;
  g.apply = torch::isfinite(norm);
  if (clip > 0) {
    const torch::Tensor clipped = torch::full_like(norm, clip).div(norm + 1e-6);
    g.scale = torch::where(norm > clip, clipped, torch::ones_like(norm)).to(torch::kFloat32);
  } else {
    g.scale = torch::ones({}, norm.options().dtype(torch::kFloat32));
  }
  return g;
}

torch::Tensor AdamW::grad_sq_norm_tensor(const torch::Tensor& grad) const {
  if (kokkos_) return torch::scalar_tensor(grad_sq_norm(grad), torch::kFloat64);
  if (device_kokkos_) {
    torch::Tensor out = torch::empty({}, grad.options().dtype(torch::kFloat64));
    adamw_kernels::device_sq_norm(grad.data_ptr<float>(), shard_.size, out.data_ptr<double>(), stream_of(grad));
    return out;
  }
  // In float64, a slice at a time: a temporary of 8 MiB, never a float64
  // copy of the whole shard (on a GPU that copy was twice the gradient).
  torch::NoGradGuard ng;
  constexpr int64_t kSlice = int64_t(1) << 20;
  const torch::Tensor g = grad.reshape({-1});
  torch::Tensor sum = torch::zeros({}, g.options().dtype(torch::kFloat64));
  for (int64_t at = 0; at < g.numel(); at += kSlice)
    sum.add_(g.narrow(0, at, std::min(kSlice, g.numel() - at)).to(torch::kFloat64).square_().sum());
  return sum;
}

double AdamW::grad_sq_norm(const torch::Tensor& grad) const {
  if (kokkos_) return adamw_kernels::host_sq_norm(grad.data_ptr<float>(), shard_.size);
  return grad_sq_norm_tensor(grad).item<double>();
}

void AdamW::step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask,
                 float grad_scale, const AdamWHyper& h) {
  const auto dev = torch::TensorOptions().device(param.device());
  step(param, grad, mask, StepGate{torch::full({}, grad_scale, dev.dtype(torch::kFloat32)),
                                   torch::ones({}, dev.dtype(torch::kBool))}, h);
}

void AdamW::step(torch::Tensor param, const torch::Tensor& grad, const torch::Tensor& mask,
                 const StepGate& gate, const AdamWHyper& h) {
  if (kokkos_) {
    if (!gate.apply.item<bool>()) return;  // host memory: reading the gate costs nothing
    ++steps_;
    adamw_kernels::host_step(param.data_ptr<float>(), grad.data_ptr<float>(), mask.data_ptr<float>(),
                             st_->m.data_ptr<float>(), st_->v.data_ptr<float>(), shard_.size,
                             gate.scale.item<float>(), consts(h, steps_));
    return;
  }
  if (device_kokkos_) {
    // One pass over memory, the gate read on the device.
    const torch::Tensor scale = gate.scale.to(torch::kFloat32).contiguous();
    const torch::Tensor apply = gate.apply.to(torch::kBool).contiguous();
    adamw_kernels::device_step(param.data_ptr<float>(), grad.data_ptr<float>(), mask.data_ptr<float>(),
                               st_->m.data_ptr<float>(), st_->v.data_ptr<float>(), shard_.size,
                               {scale.data_ptr<float>(), apply.data_ptr<bool>(), st_->t.data_ptr<float>()},
                               {h.beta1, h.beta2, float(h.eps), float(h.lr), float(h.lr * h.weight_decay)},
                               stream_of(param));
    return;
  }
  if (has_fused_adamw() && fused_fits(mask)) {
    fused_step(param, grad, gate, h);
    return;
  }
  // LibTorch's element-wise kernels: the update above, one operation at a
  // time, with every constant a 0-dim tensor on the device: a skipped step
  // (apply false) multiplies m and v by 1 and adds 0, decays by 0 and moves
  // by 0, so nothing changes, and the step count stays.
  torch::NoGradGuard ng;
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(param.device());
  const torch::Tensor on = gate.apply.to(torch::kFloat64);
  torch::Tensor& t = st_->t;
  t.add_(on.to(torch::kFloat32));
  // Bias corrections in double from the device's count, as the host kernel
  // does from its own (a count of 0, before any update, is taken as 1).
  const torch::Tensor tc = t.to(torch::kFloat64).clamp_min(1.0);
  const torch::Tensor c1 = torch::ones_like(tc).div(1.0 - torch::pow(h.beta1, tc)).to(torch::kFloat32);
  const torch::Tensor c2 = torch::ones_like(tc).div(torch::sqrt(1.0 - torch::pow(h.beta2, tc))).to(torch::kFloat32);
  const torch::Tensor one = torch::ones({}, f32);
  const torch::Tensor b1 = torch::where(gate.apply, torch::full({}, float(h.beta1), f32), one);
  const torch::Tensor b2 = torch::where(gate.apply, torch::full({}, float(h.beta2), f32), one);
  const torch::Tensor on32 = on.to(torch::kFloat32);
  const torch::Tensor lr = on32 * float(h.lr);
  const torch::Tensor decay = on32 * float(h.lr * h.weight_decay);
  const torch::Tensor g = torch::where(gate.apply, grad * gate.scale, torch::zeros({}, f32));
  torch::Tensor& m = st_->m;
  torch::Tensor& v = st_->v;
  m.mul_(b1).add_(g * (1.f - b1));
  v.mul_(b2).add_(g * (1.f - b2) * g);
  param.mul_(1.f - decay * mask);
  param.sub_(lr * (m * c1) / (v.sqrt() * c2 + float(h.eps)));
}

// LibTorch's fused AdamW (LibTorch 2.4+): one pass over memory per group of
// the shard's parameters with and without weight decay. The clip scale enters
// as the kernel's gradient divisor, the skip as its found_inf flag, and the
// count on the device moves only when the step is applied.
// Whether the mask's runs are few enough for the fused kernel: a model's mask
// has a few per parameter tensor (weights decay, biases and norms do not); a
// mask that changes every few elements would make a list of millions of
// tiny tensors, and takes the element-wise kernels instead.
bool AdamW::fused_fits(const torch::Tensor& mask) {
  constexpr size_t kMaxRuns = 4096;
  if (!st_->runs_known) {
    const torch::Tensor mk = mask.to(torch::kCPU).contiguous();  // read once: the mask never changes
    const float* w = mk.data_ptr<float>();
    for (int64_t i = 0; i < shard_.size;) {
      int64_t j = i;
      while (j < shard_.size && (w[j] != 0.f) == (w[i] != 0.f)) ++j;
      (w[i] != 0.f ? st_->decay_runs : st_->plain_runs).push_back({i, j - i});
      i = j;
      if (st_->decay_runs.size() + st_->plain_runs.size() > kMaxRuns) break;
    }
    st_->runs_known = true;
  }
  return st_->decay_runs.size() + st_->plain_runs.size() <= kMaxRuns;
}

void AdamW::fused_step(torch::Tensor& param, const torch::Tensor& grad, const StepGate& gate,
                       const AdamWHyper& h) {
  torch::NoGradGuard ng;
  const torch::Tensor on = gate.apply.to(torch::kFloat32);
  st_->t.add_(on);
  const torch::Tensor found_inf = 1.0f - on;
  const torch::Tensor divisor = torch::ones_like(on).div(gate.scale.to(torch::kFloat32));
  torch::Tensor g = grad;
  for (const bool decay : {true, false}) {
    const std::vector<Shard>& runs = decay ? st_->decay_runs : st_->plain_runs;
    if (runs.empty()) continue;
    std::vector<torch::Tensor> ps, gs, ms, vs, ts;
    for (const Shard& r : runs) {
      ps.push_back(param.narrow(0, r.offset, r.size));
      gs.push_back(g.narrow(0, r.offset, r.size));
      ms.push_back(st_->m.narrow(0, r.offset, r.size));
      vs.push_back(st_->v.narrow(0, r.offset, r.size));
      ts.push_back(st_->t);
    }
    fused_adamw(ps, gs, ms, vs, ts, h.lr, h.beta1, h.beta2, decay ? h.weight_decay : 0.0, h.eps, divisor,
                found_inf);
  }
}

double schedule_lr(double seen, double warmup, double total, double peak, double floor) {
  if (warmup > 0 && seen < warmup) return peak * seen / warmup;
  const double span = std::max(1.0, total - warmup);
  const double t = std::min(1.0, std::max(0.0, (seen - warmup) / span));
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * t));
}

}  // namespace vitkd
