#include "comm/cuda_runtime.hpp"

#ifdef VITKD_HAVE_CUDART
#include "comm/cuda_check.hpp"
#endif

#include <vector>

#include "util/error.hpp"

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

namespace {

class CudaEventMarker final : public PhaseMarker {
 public:
  explicit CudaEventMarker(cudaStream_t stream) : stream_(stream) {}
  CudaEventMarker(const CudaEventMarker&) = delete;
  CudaEventMarker& operator=(const CudaEventMarker&) = delete;
  ~CudaEventMarker() override {
    for (cudaEvent_t e : pool_) (void)cudaEventDestroy(e);  // no error path in a destructor
  }

  void mark(Phase p, bool begin) override {
    if (marks_.size() == pool_.size()) {
      cudaEvent_t e = nullptr;
      VK_CHECK(CUDA, cudaEventCreate(&e));
      pool_.push_back(e);
    }
    VK_CHECK(CUDA, cudaEventRecord(pool_[marks_.size()], stream_));
    marks_.push_back(PhaseMark{p, begin});
  }

  void settle(std::array<double, kNumPhases>& seconds) override {
    if (marks_.empty()) return;
    VK_CHECK(CUDA, cudaEventSynchronize(pool_[marks_.size() - 1]));
    add_phase_spans(
        marks_,
        [this](size_t i, size_t j) {
          float ms = 0.0f;
          VK_CHECK(CUDA, cudaEventElapsedTime(&ms, pool_[i], pool_[j]));
          return 1e-3 * ms;
        },
        seconds);
    marks_.clear();
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> pool_;  ///< pool_[i] holds marks_[i]
  std::vector<PhaseMark> marks_;   ///< since the last settle()
};

}  // namespace

std::unique_ptr<PhaseMarker> make_cuda_event_marker(void* stream) {
  return std::make_unique<CudaEventMarker>(stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy);
}

#else

bool cuda_runtime_built() { return false; }

int cuda_device_count(std::string* why) {
  if (why) *why = "this vitkd was built without the CUDA runtime";
  return 0;
}

void cuda_set_device(int) {}

std::string cuda_pci_bus_id(int) { return ""; }

std::unique_ptr<PhaseMarker> make_cuda_event_marker(void*) {
  throw UserError("CUDA-event phase timing needs a vitkd built with the CUDA runtime (VITKD_WITH_CUDA)");
}

#endif

}  // namespace vitkd
