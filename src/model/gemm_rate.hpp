#pragma once
// This machine's matrix-product rate through LibTorch: the ceiling that MFU
// (model FLOPs utilisation) is measured against, and `vitkd bench gemm`.
#include <torch/torch.h>

#include <cstdint>

namespace vitkd {

/// FLOP/s of C[m,n] = A[m,k] B[k,n] in `dtype` on `device` (on the CPU with
/// LibTorch's current thread count), repeated for about `seconds`.
double gemm_rate(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, double seconds,
                 const torch::Device& device = torch::kCPU);

/// Measured matrix-product rate in `dtype` at a large square shape, the MFU
/// ceiling: 2048^3 on the CPU (FLOP/s of the current thread count), 8192^3
/// on a GPU (FLOP/s of the device).
double measure_gemm_flops(torch::ScalarType dtype, double seconds = 1.0,
                          const torch::Device& device = torch::kCPU);

}  // namespace vitkd
