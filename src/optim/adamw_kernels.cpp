#include "optim/adamw_kernels.hpp"

#include <Kokkos_Core.hpp>
#include <cmath>

#include "util/error.hpp"

namespace vitkd::adamw_kernels {
namespace {

using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// The element update, shared by the host and the device kernel.
KOKKOS_INLINE_FUNCTION void update(int64_t i, float* p, const float* g, const float* mask, float* m,
                                   float* v, float grad_scale, const Consts& k) {
  const float gi = g[i] * grad_scale;
  const float mi = k.b1 * m[i] + (1.f - k.b1) * gi;
  const float vi = k.b2 * v[i] + (1.f - k.b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  // Decoupled weight decay (Loshchilov & Hutter), then the Adam update.
  float pi = p[i] * (1.f - k.decay * mask[i]);
  pi -= k.lr * (mi * k.c1) / (std::sqrt(vi) * k.c2 + k.eps);
  p[i] = pi;
}

}  // namespace

double host_sq_norm(const float* g, int64_t n) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  Kokkos::View<const float*, Kokkos::HostSpace, Unmanaged> gv(g, n);
  double sum = 0.0;
  Kokkos::parallel_reduce(
      "AdamW::grad_sq_norm", Kokkos::RangePolicy<Host>(0, n),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(gv(i)) * double(gv(i)); }, sum);
  return sum;
}

void host_step(float* p, const float* g, const float* mask, float* m, float* v, int64_t n,
               float grad_scale, const Consts& k) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  Kokkos::parallel_for(
      "AdamW::step", Kokkos::RangePolicy<Host>(0, n),
      KOKKOS_LAMBDA(const int64_t i) { update(i, p, g, mask, m, v, grad_scale, k); });
  Kokkos::fence();
}

#ifdef KOKKOS_ENABLE_CUDA

bool device_built() { return true; }

void device_sq_norm(const float* g, int64_t n, double* out, void* stream) {
  const Kokkos::Cuda space(static_cast<cudaStream_t>(stream));
  Kokkos::View<const float*, Kokkos::CudaSpace, Unmanaged> gv(g, n);
  Kokkos::View<double, Kokkos::CudaSpace, Unmanaged> result(out);
  // A reduction into a device view: queued, the host does not wait.
  Kokkos::parallel_reduce(
      "AdamW::grad_sq_norm_device", Kokkos::RangePolicy<Kokkos::Cuda>(space, 0, n),
      KOKKOS_LAMBDA(const int64_t i, double& acc) { acc += double(gv(i)) * double(gv(i)); }, result);
}

void device_step(float* p, const float* g, const float* mask, float* m, float* v, int64_t n,
                 const DeviceGate& gate, const DeviceHyper& h, void* stream) {
  const Kokkos::Cuda space(static_cast<cudaStream_t>(stream));
  const DeviceGate dg = gate;
  const DeviceHyper dh = h;
  Kokkos::parallel_for(
      "AdamW::step_device", Kokkos::RangePolicy<Kokkos::Cuda>(space, 0, n), KOKKOS_LAMBDA(const int64_t i) {
        if (!*dg.apply) return;
        const double t = double(*dg.t) + 1.0;  // this update's number
        const Consts k = consts_of_update(dh.beta1, dh.beta2, dh.eps, dh.lr, dh.decay, t);
        update(i, p, g, mask, m, v, *dg.scale, k);
      });
  // The count moves after every element has read it (same stream: in order).
  Kokkos::parallel_for(
      "AdamW::count_device", Kokkos::RangePolicy<Kokkos::Cuda>(space, 0, 1),
      KOKKOS_LAMBDA(const int64_t) { if (*dg.apply) *dg.t += 1.0f; });
}

#else

bool device_built() { return false; }

void device_sq_norm(const float*, int64_t, double*, void*) {
  throw RuntimeError("adamw_kernels::device_sq_norm: this Kokkos has no CUDA backend");
}
void device_step(float*, const float*, const float*, float*, float*, int64_t, const DeviceGate&,
                 const DeviceHyper&, void*) {
  throw RuntimeError("adamw_kernels::device_step: this Kokkos has no CUDA backend");
}

#endif

}  // namespace vitkd::adamw_kernels
