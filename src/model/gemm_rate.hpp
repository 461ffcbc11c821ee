#pragma once
// This machine's matrix-product rate through LibTorch: the ceiling that MFU
// (model FLOPs utilisation) is measured against, and `vitkd bench gemm`.
#include <torch/torch.h>

#include <cstdint>

namespace vitkd {

/// FLOP/s of C[m,n] = A[m,k] B[k,n] in `dtype` with LibTorch's current
/// thread count, repeated for about `seconds`.
double gemm_rate(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, double seconds);

/// Measured bf16 matrix-product rate at a large square shape (2048^3), the
/// MFU ceiling: FLOP/s of the current thread count.
double measure_gemm_bf16_flops(double seconds = 1.0);

}  // namespace vitkd
