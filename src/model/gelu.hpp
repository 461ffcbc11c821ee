#pragma once
// GELU, exact (erf) form, y = x * Phi(x), as a differentiable LibTorch op with
// its own vectorised forward and backward kernels.
//
// Why not torch::gelu: in LibTorch 1.13 on the 2-core Zen 4 machines the bf16
// forward of the MLP's [B*T, 4D] activation takes about 2/3 of the time of
// the fc1 matrix product that feeds it, and the backward twice that (see
// experiments/performance-log.md). These kernels evaluate Phi with a rational
// approximation of erf (absolute error below 1e-7 in fp32, far below bf16's
// rounding) and exp(-x^2/2) with a degree-6 polynomial, in fp32 registers,
// for fp32 and bf16 tensors of any shape. Other dtypes go to torch::gelu.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vitkd {

/// GELU of x (fp32 or bf16; any shape). Differentiable: the backward is
/// dx = dy * (Phi(x) + x * phi(x)), computed from the saved input.
at::Tensor gelu(const at::Tensor& x);

/// gelu(z + bias), bias broadcast over z's last dimension ([..., M] and [M]),
/// in one pass: the MLP computes fc1 as a product without bias and adds the
/// bias here, which saves addmm's copy of the bias into its output (3.7 % of
/// the teacher's forward pass, experiments/performance-log.md). z is fp32 or bf16 and
/// the sum is formed in fp32; bias may be fp32 or bf16. Differentiable in both:
/// dz = dy * gelu'(z + bias) and dbias = the fp32 sum of dz over all rows, in
/// a fixed order (the same for any thread count).
at::Tensor bias_gelu(const at::Tensor& z, const at::Tensor& bias);

/// The path of bias_gelu for devices and other dtypes, LibTorch ops alone:
/// torch::gelu(z + bias) with the bias cast to z's dtype first, so that the
/// result (and what autograd saves) stays in z's dtype under autocast, as
/// PyTorch's autocast does with a linear layer's bias. Exposed for the tests.
at::Tensor bias_gelu_tensor(const at::Tensor& z, const at::Tensor& bias);

namespace gelu_kernel {
/// y[i] = gelu(x[i]), dx[i] = dy[i] * gelu'(x[i]) for n fp32 values
/// (exposed for the tests; the op above calls them chunk by chunk).
void forward(const float* x, float* y, int64_t n);
void backward(const float* dy, const float* x, float* dx, int64_t n);
}  // namespace gelu_kernel

}  // namespace vitkd
