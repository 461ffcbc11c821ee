#include "comm/device.hpp"

#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#ifdef VITKD_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "comm/backend.hpp"
#include "comm/cuda_runtime.hpp"
#include "comm/world.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

// Whether the LibTorch this vitkd was built against has CUDA (CMake defines
// VITKD_TORCH_CUDA from the Torch package's TORCH_CUDA_LIBRARIES).
#ifdef VITKD_TORCH_CUDA
constexpr bool kTorchCuda = true;
#else
constexpr bool kTorchCuda = false;
#endif

// GPUs this rank can compute on: 0 unless LibTorch and the runtime both see them.
int usable_gpus(std::string* why) {
  if (!kTorchCuda) {
    *why = std::string("this vitkd was built against LibTorch ") + TORCH_VERSION +
           " without CUDA (CPU only)";
    return 0;
  }
  std::string rt;
  const int n = cuda_device_count(&rt);
  if (n == 0 || !torch::cuda::is_available()) {
    *why = "no CUDA GPU is visible on host " + world().host + " (" + (rt.empty() ? "LibTorch sees none" : rt) + ")";
    return 0;
  }
  return n;
}

// Throws `msg` on the lowest rank whose `failed` is true; the other ranks go
// on into the next collective, where that rank's abort ends them, so the
// message reaches the user once even when every rank found the same problem.
// Collective.
void fail_on_first_rank(bool failed, const std::string& msg) {
  const World& w = world();
  const int64_t first = allreduce_min(static_cast<int64_t>(failed ? w.rank : w.size));
  if (first == w.rank) throw UserError(msg, /*collective=*/false);
  if (failed) barrier();  // never completes: the first failing rank's abort ends this rank
}

}  // namespace

int64_t ranks_sharing(const std::vector<double>& keys, double mine) {
  return std::count(keys.begin(), keys.end(), mine);
}

std::string RunDevice::name() const {
  return cuda() ? std::string(choice_name(DeviceKind::Cuda)) + ":" + std::to_string(index) : choice_name(DeviceKind::Cpu);
}

std::string RunDevice::describe() const {
  if (!cuda()) return name();
  return name() + " (" + std::to_string(visible_gpus) + " GPU(s) visible, " +
         std::to_string(world().local_size) + " rank(s) on this node)";
}

RunDevice select_device(DeviceKind device, Backend backend) {
  const World& w = world();
  RunDevice d;
  std::string why;
  d.visible_gpus = device == DeviceKind::Cpu ? 0 : usable_gpus(&why);
  if (device == DeviceKind::Cuda) {
    // Hosts can differ, so some ranks alone may fail.
    fail_on_first_rank(d.visible_gpus == 0,
                       setting_text("run.device", DeviceKind::Cuda) + ", but " + why +
                           "; run on GPU nodes with a CUDA build (README, GPUs) or set " +
                           setting_text("run.device", DeviceKind::Cpu));
    d.kind = DeviceKind::Cuda;
  } else if (device == DeviceKind::Auto) {
    // CUDA only when every rank has a GPU: one device type for the whole job.
    d.kind = allreduce_min(static_cast<int64_t>(d.visible_gpus)) > 0 ? DeviceKind::Cuda : DeviceKind::Cpu;
  }
  const BackendTraits* named = built_backend(backend);
  if (named && named->needs_cuda && !d.cuda())
    throw UserError(setting_text("dist.backend", backend) +
                    " reduces device memory, but this run computes on the CPU (" + setting_text("run.device", device) +
                    "); use " + setting_text("dist.backend", Backend::Mpi) + " (or \"" + choice_name(Backend::Auto) +
                    "\") on CPUs");

  int64_t sharing = 1;
  std::string gpu;
  if (d.cuda()) {
    if (!w.mpi_serialized)
      throw UserError(setting_text("run.device", DeviceKind::Cuda) + " calls MPI from LibTorch's autograd thread, but the MPI library "
                      "grants only thread level " + std::to_string(w.thread_level) +
                      " (below MPI_THREAD_SERIALIZED); use an MPI built with thread support "
                      "(OpenMPI, MPICH), or " + setting_text("run.device", DeviceKind::Cpu));
    // Ranks that see several GPUs take one each by node-local rank; a rank
    // the launcher bound to one GPU (srun --gpus-per-task=1) sees only it.
    d.index = w.local_rank % d.visible_gpus;
    cuda_set_device(d.index);  // before any CUDA allocation of this rank
    // NCCL refuses two ranks on one GPU: find them by host and PCI bus id.
    gpu = w.host + " " + cuda_pci_bus_id(d.index);
    const double key = static_cast<double>(std::hash<std::string>{}(gpu) & ((uint64_t(1) << 52) - 1));
    sharing = ranks_sharing(allgather(key), key);
  }
  // The most ranks on one GPU anywhere: every rank takes the same backend.
  const int64_t most = static_cast<int64_t>(allreduce_max(static_cast<double>(sharing)));
  std::string msg;
  d.backend = resolve_backend(backend, d.cuda(), most, w.size, &msg);
  if (!msg.empty()) log0("%s\n", msg.c_str());
  fail_on_first_rank(built_backend(d.backend)->one_gpu_per_rank && sharing > 1,
                     std::to_string(sharing) + " ranks would share GPU " + gpu + " (" +
                         std::to_string(w.local_size) + " ranks on the node, " + std::to_string(d.visible_gpus) +
                         " GPU(s) visible to this one); " + backend_label(d.backend) + " needs one GPU per rank: start at most one rank per "
                         "GPU (srun --gpus-per-task=1), or share GPUs with " + setting_text("dist.backend", Backend::Mpi) +
                         " (or \"" + choice_name(Backend::Auto) + "\")");
  return d;
}

void synchronize(const RunDevice& d) {
  if (d.cuda()) torch::cuda::synchronize(d.index);
}

std::unique_ptr<PhaseMarker> make_phase_marker(const RunDevice& d) {
  if (!d.cuda()) return nullptr;
#ifdef VITKD_TORCH_CUDA
  return make_cuda_event_marker(c10::cuda::getCurrentCUDAStream(d.index).stream());
#else
  return make_cuda_event_marker(nullptr);
#endif
}

LaggedReadback::LaggedReadback() = default;
LaggedReadback::~LaggedReadback() = default;

void LaggedReadback::push(const torch::Tensor& values) {
  Entry e;
  const torch::Tensor v = values.detach().to(torch::kFloat64).reshape({-1});
  if (!v.is_cuda()) {
    e.host = v.clone();
  } else {
    e.host = torch::empty({v.numel()}, torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(true));
    e.host.copy_(v, /*non_blocking=*/true);
    e.event = std::make_unique<CudaEvent>();
#ifdef VITKD_TORCH_CUDA
    e.event->record(c10::cuda::getCurrentCUDAStream(v.device().index()).stream());
#else
    e.event->record(nullptr);
#endif
  }
  entries_.push_back(std::move(e));
}

std::vector<std::vector<double>> LaggedReadback::take(bool all) {
  std::vector<std::vector<double>> out;
  while (!entries_.empty()) {
    Entry& e = entries_.front();
    if (e.event && !all && entries_.size() == 1) break;  // the newest stays queued
    if (e.event) e.event->wait();
    const double* p = e.host.data_ptr<double>();
    out.emplace_back(p, p + e.host.numel());
    entries_.pop_front();
  }
  return out;
}

}  // namespace vitkd
