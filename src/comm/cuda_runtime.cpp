#include "comm/cuda_runtime.hpp"

#ifdef VITKD_HAVE_CUDART
#include "comm/cuda_check.hpp"
#endif

namespace vitkd {

#ifdef VITKD_HAVE_CUDART

cudaError_t check_CUDA(cudaError_t rc, const char* expr, const char* file, int line) {
  if (rc == cudaSuccess) return rc;
  check_failed("CUDA", expr, file, line, cudaGetErrorString(rc));
}

bool cuda_runtime_built() { return true; }

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = cudaGetErrorString(rc);
    (void)cudaGetLastError();  // clear the sticky error for later CUDA calls
    return 0;
  }
  if (n <= 0 && why) *why = "0 devices";
  return n > 0 ? n : 0;
}

void cuda_set_device(int device) { VK_CHECK(CUDA, cudaSetDevice(device)); }

std::string cuda_pci_bus_id(int device) {
  char id[64] = {0};
  VK_CHECK(CUDA, cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), device));
  return id;
}

#else

bool cuda_runtime_built() { return false; }

int cuda_device_count(std::string* why) {
  if (why) *why = "this vitkd was built without the CUDA runtime";
  return 0;
}

void cuda_set_device(int) {}

std::string cuda_pci_bus_id(int) { return ""; }

#endif

}  // namespace vitkd
