#pragma once
// Softmax over the last dimension of bf16 attention scores, in one pass over
// bf16 memory with fp32 arithmetic, as a differentiable LibTorch op.
//
// Why: under LibTorch 1.13's CPU autocast, Tensor::softmax widens bf16 scores
// to fp32, runs the fp32 kernel and returns fp32 probabilities, which the next
// product narrows back: two casts of the [B*H, Q, T] score matrix each way
// and an fp32 softmax (the largest line after the products and casts in the
// 224² profile, experiments/performance-log.md). Here each row is widened
// into fp32 registers once, its maximum, exponentials and sum are formed in
// fp32, and the probabilities are written in bf16; the backward reads the
// saved bf16 probabilities and the incoming gradient the same way.
// fp32 scores and other devices go to Tensor::softmax unchanged, so the fp32
// path stays bit for bit what it was.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vitkd {

/// softmax(x, -1). For a bf16 CPU tensor: y = exp(x - max) / sum in fp32,
/// rounded to bf16 once (the rows of any shape; their length any; a score
/// more than 87 below its row's maximum, -inf included, gets exactly 0), and
/// differentiable: dx = y * (dy - sum(dy * y)), formed in fp32 from the bf16
/// y and dy, rounded to bf16 once. The sums run in a fixed order, so the
/// result does not depend on the thread count. Anything else: x.softmax(-1).
at::Tensor softmax_lastdim(const at::Tensor& x);

namespace softmax_kernel {
/// One row of n bf16 values (bit patterns): forward y = softmax(x), and
/// backward dx from the forward's y and dy. Exposed for the tests.
void forward(const uint16_t* x, uint16_t* y, int64_t n);
void backward(const uint16_t* y, const uint16_t* dy, uint16_t* dx, int64_t n);
}  // namespace softmax_kernel

}  // namespace vitkd
