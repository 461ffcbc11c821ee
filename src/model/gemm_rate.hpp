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

/// The MFU ceilings kept per machine, one per line "KEY FLOP/s-per-core"
/// (KEY: host, LibTorch, precision, device, ranks on the node and threads
/// per rank, without spaces): the file ($VITKD_CEILING_FILE, else
/// $XDG_CACHE_HOME/vitkd/gemm-ceilings.txt, else ~/.cache/vitkd/...).
std::string ceiling_file();
/// The value kept for `key` in `path`, 0 when none (or the file is unreadable).
double kept_ceiling(const std::string& path, const std::string& key);
/// Keeps `flops_per_core` for `key` in `path`, replacing an older value
/// (written through a temporary file and a rename; a failure to write is
/// returned as false, never fatal: the ceiling is then measured again).
bool keep_ceiling(const std::string& path, const std::string& key, double flops_per_core);

}  // namespace vitkd
