#pragma once
// AdamW's two kernels on raw float32 buffers, as Kokkos kernels, each one
// pass over memory: the squared gradient norm, and the fused update (the
// moments m and v, decoupled weight decay and the parameter step together).
//
// No LibTorch here, in the interface or the implementation: where Kokkos has
// its CUDA backend (Spack's kokkos+cuda), CMake compiles this file with
// Kokkos's device compiler (kokkos_compilation) while the rest of vitkd stays
// with the host compiler. optim/adamw.hpp chooses between these kernels and
// LibTorch's element-wise ones.
#include <math.h>

#include <cstdint>

// Host and device code where the device compiler reads this header.
#if defined(__CUDACC__)
#define VITKD_HOST_DEVICE __host__ __device__
#else
#define VITKD_HOST_DEVICE
#endif

namespace vitkd::adamw_kernels {

/// The update's constants for one step (t 1-based): beta1, beta2, eps, lr,
/// decay = lr * weight_decay, c1 = 1 / (1 - beta1^t), c2 = 1 / sqrt(1 - beta2^t).
struct Consts {
  float b1, b2, eps, lr, decay, c1, c2;
};

/// The constants of update number `t` (1-based), bias corrections in double:
/// the one formula of the host and device kernels (LibTorch's element-wise
/// path in optim/adamw.cpp computes the same on tensors).
VITKD_HOST_DEVICE inline Consts consts_of_update(double beta1, double beta2, float eps, float lr, float decay,
                                                 double t) {
  return {float(beta1), float(beta2), eps, lr, decay, float(1.0 / (1.0 - ::pow(beta1, t))),
          float(1.0 / ::sqrt(1.0 - ::pow(beta2, t)))};
}

/// Host memory (Kokkos::DefaultHostExecutionSpace): the sum of g[i]^2 over
/// i < n, accumulated in double.
double host_sq_norm(const float* g, int64_t n);
/// Host memory: one update of p, m, v (n elements each); g is multiplied by
/// grad_scale first, mask (1 or 0) says where weight decay applies.
void host_step(float* p, const float* g, const float* mask, float* m, float* v, int64_t n,
               float grad_scale, const Consts& k);

/// Whether this build's Kokkos runs kernels on a CUDA device.
bool device_built();

/// Device memory, queued on `stream` (a cudaStream_t) without the host
/// waiting: *out (a double in device memory) = sum of g[i]^2.
void device_sq_norm(const float* g, int64_t n, double* out, void* stream);

/// The step's gate in device memory (optim/adamw.hpp, StepGate): the
/// gradients' multiplier, whether to update at all, and the count of
/// updates applied so far (bias correction), incremented by an update.
struct DeviceGate {
  const float* scale;
  const bool* apply;
  float* t;  ///< exact below 2^24 updates
};
/// Hyper-parameters of the device update (bias corrections come from *t).
struct DeviceHyper {
  double beta1, beta2;
  float eps, lr, decay;
};
/// Device memory, queued on `stream`: where *gate.apply, one update of p, m,
/// v as host_step with the constants of step *gate.t + 1, then *gate.t += 1;
/// otherwise nothing changes. No host read anywhere.
void device_step(float* p, const float* g, const float* mask, float* m, float* v, int64_t n,
                 const DeviceGate& gate, const DeviceHyper& h, void* stream);

}  // namespace vitkd::adamw_kernels
