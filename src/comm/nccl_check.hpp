#pragma once
// VK_CHECK(CUDA, call) and VK_CHECK(NCCL, call) for the NCCL backend
// (util/error.hpp). Included only by comm/nccl_backend.cpp, the one
// translation unit compiled against the CUDA runtime and NCCL.
#include <cuda_runtime.h>
#include <nccl.h>

#include "util/error.hpp"

namespace vitkd {

/// On failure: check_failed("CUDA", ...) with cudaGetErrorString(rc).
cudaError_t check_CUDA(cudaError_t rc, const char* expr, const char* file, int line);
/// On failure: check_failed("NCCL", ...) with ncclGetErrorString(rc).
ncclResult_t check_NCCL(ncclResult_t rc, const char* expr, const char* file, int line);

}  // namespace vitkd
