#pragma once
// `vitkd bench ...`: measurements of this machine's ceilings.
//   bench gemm  bf16 and fp32 matrix-product rates (FLOP/s per core) through
//               LibTorch, at the Fashion-MNIST models' shapes and a large square
//   bench ops   vitkd's GELU kernels against torch::gelu (forward, backward)
//   bench comm  reduce-scatter of a gradient buffer with fp32 and bf16 on the
//               wire, and the all-gather, over the MPI ranks
#include <string>
#include <vector>

namespace vitkd {

int bench_main(const std::vector<std::string>& args);

/// Measured bf16 matrix-product rate of one thread (FLOP/s) at a large
/// square shape: the ceiling for MFU.
double measure_gemm_bf16_flops(double seconds = 1.0);

}  // namespace vitkd
