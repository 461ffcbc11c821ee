#include "comm/cuda_runtime.hpp"

#ifdef VITKD_HAVE_CUDART
#include "comm/cuda_check.hpp"
#endif

#include <deque>
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
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);  // no error path in a destructor
    for (Window& w : windows_)
      for (cudaEvent_t e : w.events) (void)cudaEventDestroy(e);
  }

  void mark(Phase p, bool begin) override {
    if (windows_.empty()) windows_.emplace_back();
    Window& w = windows_.back();
    cudaEvent_t e = nullptr;
    if (free_.empty()) {
      VK_CHECK(CUDA, cudaEventCreate(&e));
    } else {
      e = free_.back();
      free_.pop_back();
    }
    w.events.push_back(e);  // owned by the window from here on
    VK_CHECK(CUDA, cudaEventRecord(e, stream_));
    w.marks.push_back(PhaseMark{p, begin});
  }

  void settle(std::array<double, kNumPhases>& seconds) override {
    while (!windows_.empty()) read_oldest(seconds);
  }

  // Closes the open window and reads every window but the newest: the marks of
  // one call ago, whose events the device has normally passed by now.
  void settle_lagged(std::array<double, kNumPhases>& seconds) override {
    if (windows_.empty() || windows_.back().marks.empty()) return;
    windows_.emplace_back();  // later marks open a new window
    while (windows_.size() > 2) read_oldest(seconds);
  }

 private:
  struct Window {
    std::vector<cudaEvent_t> events;  ///< events[i] holds marks[i]
    std::vector<PhaseMark> marks;
  };

  void read_oldest(std::array<double, kNumPhases>& seconds) {
    Window w = std::move(windows_.front());
    windows_.pop_front();
    if (w.marks.empty()) return;
    VK_CHECK(CUDA, cudaEventSynchronize(w.events.back()));
    add_phase_spans(
        w.marks,
        [&w](size_t i, size_t j) {
          float ms = 0.0f;
          VK_CHECK(CUDA, cudaEventElapsedTime(&ms, w.events[i], w.events[j]));
          return 1e-3 * ms;
        },
        seconds);
    free_.insert(free_.end(), w.events.begin(), w.events.end());
  }

  cudaStream_t stream_;
  std::deque<Window> windows_;       ///< oldest first; the back one takes new marks
  std::vector<cudaEvent_t> free_;    ///< recorded and read: reused by mark()
};

}  // namespace

std::unique_ptr<PhaseMarker> make_cuda_event_marker(void* stream) {
  return std::make_unique<CudaEventMarker>(stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy);
}

CudaEvent::CudaEvent() {
  cudaEvent_t e = nullptr;
  VK_CHECK(CUDA, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
}
CudaEvent::~CudaEvent() { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }  // no error path here
void CudaEvent::record(void* stream) {
  VK_CHECK(CUDA, cudaEventRecord(static_cast<cudaEvent_t>(event_),
                                 stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy));
}
void CudaEvent::wait() { VK_CHECK(CUDA, cudaEventSynchronize(static_cast<cudaEvent_t>(event_))); }

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

CudaEvent::CudaEvent() {
  throw UserError("reading device results late needs a vitkd built with the CUDA runtime (VITKD_WITH_CUDA)");
}
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(void*) {}
void CudaEvent::wait() {}

#endif

}  // namespace vitkd
