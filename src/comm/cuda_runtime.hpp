#pragma once
// The few CUDA-runtime calls vitkd makes itself, for translation units built
// by the host compiler. In a build without the CUDA toolkit
// (VITKD_HAVE_CUDART undefined) they behave as on a machine without GPUs.
#include <memory>
#include <string>

#include "util/timing.hpp"

namespace vitkd {

/// Whether this vitkd was built against the CUDA runtime.
bool cuda_runtime_built();
/// Devices the CUDA runtime sees (cudaGetDeviceCount). Every failure (no
/// driver, no device, driver too old, no CUDA runtime in the build) is 0
/// devices, with the reason in `why` when given.
int cuda_device_count(std::string* why = nullptr);
/// The PCI bus id of CUDA device `device` (e.g. "0000:3B:00.0"): the same
/// GPU has the same id in every process of a node, whatever each process's
/// CUDA_VISIBLE_DEVICES numbering.
std::string cuda_pci_bus_id(int device);
/// Makes `device` current for this thread (cudaSetDevice); every later CUDA
/// allocation of this rank, LibTorch's included, lands there.
void cuda_set_device(int device);
/// Phase marks as CUDA events recorded on `stream` (a cudaStream_t; null:
/// the legacy default stream, which LibTorch computes on unless a caller made
/// another stream current) of the current device. Events come from a pool
/// (about 20 per step, twice that with the lag) and are reused; settle()
/// waits for the last one (cudaEventSynchronize) and reads each begin/end
/// pair with cudaEventElapsedTime; settle_lagged() reads only the marks of
/// the calls before the last one, so a step never waits for its own work.
/// Without the CUDA runtime in the build: a UserError.
std::unique_ptr<PhaseMarker> make_cuda_event_marker(void* stream);

/// A CUDA event without timing, for reading device results late: record()
/// it on `stream` (a cudaStream_t; null: the legacy default stream) after
/// queuing a copy, wait() for that copy later. Without the CUDA runtime in
/// the build: a UserError on construction.
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void record(void* stream);
  void wait();

 private:
  void* event_ = nullptr;
};

}  // namespace vitkd
