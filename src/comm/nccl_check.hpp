#pragma once
// VK_CHECK(NCCL, call) (util/error.hpp) for the NCCL backend, the one
// translation unit compiled against NCCL; VK_CHECK(CUDA, ...) comes with it.
#include <nccl.h>

#include "comm/cuda_check.hpp"

namespace vitkd {

/// On failure: check_failed("NCCL", ...) with ncclGetErrorString(rc).
ncclResult_t check_NCCL(ncclResult_t rc, const char* expr, const char* file, int line);

}  // namespace vitkd
