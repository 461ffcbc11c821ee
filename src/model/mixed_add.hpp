#pragma once
// The two additions of a bf16 forward pass that mix bf16 and fp32 operands,
// as differentiable LibTorch ops with their own vectorised kernels:
//   bias_add:     a Linear layer's bf16 product [..., M] plus its fp32 bias [M]
//                 (bf16 result, the sum formed in fp32);
//   residual_add: the fp32 residual stream [..., D] plus a block's bf16
//                 branch [..., D] (fp32 result).
//
// Why: LibTorch's CPU kernels run an operation whose operands differ in dtype
// on a slower, converting path. On an AMX Xeon (LibTorch 2.15, one thread)
// out.add_(fp32 bias) into a bf16 [3152, 1152] product took 2.5x the time of
// the same add with a bf16 bias, and fp32 + bf16 about 2x fp32 + fp32
// (experiments/performance-log.md, 2026-12-07).
//
// Both compute exactly what LibTorch computes for those operands: each sum in
// fp32, rounded to bf16 (nearest even) where the result is bf16. The values
// are therefore bitwise LibTorch's. Gradients: residual_add passes dy to the
// stream and dy rounded to bf16 to the branch (as autograd does); bias_add
// passes dy to the product and sums dy over the rows into an fp32 bias
// gradient in a fixed order (the same for any thread count; LibTorch rounds
// that sum to bf16 before widening it).
//
// Other dtypes, devices or layouts fall back to LibTorch's own ops; fp32
// runs therefore never reach the kernels.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vitkd {

/// z + bias, bias broadcast over z's last dimension. z bf16 contiguous on the
/// CPU with bias fp32 [M]: the kernel (bf16 result); otherwise z + bias.
at::Tensor bias_add(const at::Tensor& z, const at::Tensor& bias);

/// x + a of one shape. x fp32 and a bf16, both contiguous on the CPU: the
/// kernel (fp32 result); otherwise x + a.
at::Tensor residual_add(const at::Tensor& x, const at::Tensor& a);

}  // namespace vitkd
