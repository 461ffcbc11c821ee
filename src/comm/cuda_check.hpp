#pragma once
// VK_CHECK(CUDA, call) (util/error.hpp) for translation units compiled
// against the CUDA runtime (comm/cuda_runtime.cpp, comm/nccl_backend.cpp).
#include <cuda_runtime.h>

#include "util/error.hpp"

namespace vitkd {

/// On failure: check_failed("CUDA", ...) with cudaGetErrorString(rc).
cudaError_t check_CUDA(cudaError_t rc, const char* expr, const char* file, int line);

}  // namespace vitkd
