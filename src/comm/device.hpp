#pragma once
// The device a run computes on (run.device) and the gradient backend that
// goes with it (dist.backend), chosen once at start-up, before anything
// allocates device memory.
//
// A CUDA rank uses GPU (node-local rank mod visible GPUs): with the NCCL
// backend each rank needs a GPU of its own (NCCL refuses two ranks on one
// device), with the MPI backend ranks may share one (gradients are staged
// through pinned host buffers).
#include <torch/torch.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "util/timing.hpp"

namespace vitkd {


struct RunDevice {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;              ///< CUDA device ordinal (0 on the CPU)
  int visible_gpus = 0;       ///< CUDA devices this rank sees (0 without CUDA LibTorch)
  Backend backend = Backend::Mpi;  ///< resolved dist.backend: a built backend (comm/backend.hpp), Local at one rank

  bool cuda() const { return kind == DeviceKind::Cuda; }
  torch::Device torch_device() const {
    return cuda() ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index))
                  : torch::Device(torch::kCPU);
  }
  /// "cpu" or "cuda:<index>"
  std::string name() const;
  /// One line for the start-up echo.
  std::string describe() const;
};

/// Resolves run.device and dist.backend on every rank and makes the chosen GPU current. "auto"
/// device: CUDA when LibTorch has CUDA and every rank sees a GPU; the
/// backend by resolve_backend (comm/backend.hpp): on CUDA the preferred
/// built GPU backend (NCCL) with one rank per GPU, MPI otherwise. Collective.
/// Throws UserError (one line, exit 2) for: "cuda" without CUDA LibTorch or
/// without a visible GPU, a GPU-only backend on the CPU, a backend this
/// vitkd was built without, and two ranks on one GPU (same host and PCI bus
/// id) with a backend that needs one GPU per rank.
RunDevice select_device(DeviceKind device, Backend backend);

/// How many of the ranks' GPU keys (host + PCI bus id, one per rank) equal `mine`.
int64_t ranks_sharing(const std::vector<double>& keys, double mine);

/// Waits for all work queued on the device (no-op on the CPU).
void synchronize(const RunDevice& d);
/// The run's phase marker (PhaseTimes::marker): CUDA events on LibTorch's
/// current stream on a GPU; null on the CPU (host wall-clock timing).
std::unique_ptr<PhaseMarker> make_phase_marker(const RunDevice& d);

class CudaEvent;

/// Small device results (a step's loss and gradient norm) read without the
/// host waiting for the work it has just queued. push() starts reading a
/// 1-D float64 tensor; take() returns the values pushed so far, oldest
/// first. On a GPU each push is a copy into page-locked memory and an event
/// on LibTorch's current stream, and take(false) returns every entry but the
/// newest (waiting only for copies queued a step or more earlier); on the
/// CPU every entry is ready at once and take() returns all of them.
/// take(true) returns everything, waiting where needed.
class LaggedReadback {
 public:
  LaggedReadback();
  ~LaggedReadback();
  LaggedReadback(const LaggedReadback&) = delete;
  LaggedReadback& operator=(const LaggedReadback&) = delete;
  void push(const torch::Tensor& values);
  std::vector<std::vector<double>> take(bool all);
  /// Entries pushed and not yet taken.
  size_t pending() const { return entries_.size(); }

 private:
  struct Entry {
    torch::Tensor host;                ///< float64 on the host (page-locked when copied from a GPU)
    std::unique_ptr<CudaEvent> event;  ///< null when `host` is complete
  };
  std::deque<Entry> entries_;
};

}  // namespace vitkd
