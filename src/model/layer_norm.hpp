#pragma once
// LayerNorm of the fp32 residual stream straight into bf16, for a norm whose
// result only feeds matrix products (the blocks' norm1 and norm2, the final
// norm before the heads), as a differentiable LibTorch op with its own
// vectorised kernels.
//
// Under bf16 autocast LibTorch computes LayerNorm in fp32, writes the fp32
// result, and the next product casts it to bf16: one more pass over the
// activation each way (the cast in the forward pass, its widening in the
// backward pass: two of `aten::copy_`'s calls per norm,
// experiments/performance-log.md). This op forms the same fp32 values (mean
// and variance over the last dimension in fp32, two passes) and writes them
// rounded to bf16; its backward reads the bf16 gradient directly and returns
// the fp32 gradients of x, gamma and beta, the latter two summed over the rows
// in a fixed order (the same for any thread count).
//
// The values agree with LibTorch's LayerNorm followed by the cast to within
// one bf16 step (fp32 sums in another order); fp32 runs never reach it.
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/normalization.h>

namespace vitkd {

/// LayerNorm over the last dimension D of x (fp32, contiguous, on the CPU),
/// with gamma and beta fp32 [D]: y = (x - mean) / sqrt(var + eps) * gamma +
/// beta, rounded to bf16. Differentiable in x, gamma and beta.
at::Tensor layer_norm_bf16(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta, double eps);

/// norm(x) for a result that only feeds matrix products: layer_norm_bf16
/// under CPU bf16 autocast (x fp32 and contiguous on the CPU, an affine norm
/// over the last dimension), norm(x) otherwise.
at::Tensor norm_for_products(torch::nn::LayerNorm norm, const at::Tensor& x);

}  // namespace vitkd
