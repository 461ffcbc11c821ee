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

#ifdef VITKD_HAVE_NCCL
constexpr bool kNccl = true;
#else
constexpr bool kNccl = false;
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

std::string resolve_backend(const std::string& backend, bool cuda, bool nccl_built, int64_t most_sharing,
                            int64_t world_size, std::string* note) {
  if (note) note->clear();
  if (world_size == 1 && backend != "nccl") return "local";
  if (backend == "mpi" || !cuda) return "mpi";
  if (backend == "nccl") {
    if (!nccl_built)
      throw UserError("dist.backend = \"nccl\", but this vitkd was built without NCCL "
                      "(configure with -DVITKD_WITH_NCCL=ON and CUDA + NCCL installed); use \"mpi\"");
    return "nccl";  // ranks sharing a GPU are refused by the caller, on the rank that shares
  }
  if (!nccl_built) return "mpi";
  if (most_sharing > 1) {
    if (note)
      *note = "dist.backend = \"auto\": " + std::to_string(most_sharing) +
              " ranks share one GPU and NCCL needs one GPU per rank, so gradients go through MPI "
              "(pinned host buffers); start one rank per GPU for NCCL";
    return "mpi";
  }
  return "nccl";
}

std::string RunDevice::name() const { return cuda() ? "cuda:" + std::to_string(index) : "cpu"; }

std::string RunDevice::describe() const {
  if (!cuda()) return "cpu";
  return name() + " (" + std::to_string(visible_gpus) + " GPU(s) visible, " +
         std::to_string(world().local_size) + " rank(s) on this node)";
}

RunDevice select_device(const std::string& device, const std::string& backend) {
  const World& w = world();
  RunDevice d;
  std::string why;
  d.visible_gpus = device == "cpu" ? 0 : usable_gpus(&why);
  if (device == "cuda") {
    // Hosts can differ, so some ranks alone may fail.
    fail_on_first_rank(d.visible_gpus == 0,
                       "run.device = \"cuda\", but " + why +
                           "; run on GPU nodes with a CUDA build (README, GPUs) or set run.device = \"cpu\"");
    d.kind = DeviceKind::Cuda;
  } else if (device == "auto") {
    // CUDA only when every rank has a GPU: one device type for the whole job.
    d.kind = allreduce_min(static_cast<int64_t>(d.visible_gpus)) > 0 ? DeviceKind::Cuda : DeviceKind::Cpu;
  } else if (device != "cpu") {
    throw UserError("run.device = \"" + device + "\" is not one of \"auto\", \"cpu\", \"cuda\"");
  }

  if (backend != "auto" && backend != "mpi" && backend != "nccl")
    throw UserError("dist.backend = \"" + backend + "\" is not one of \"auto\", \"mpi\", \"nccl\"");
  if (backend == "nccl" && !d.cuda())
    throw UserError("dist.backend = \"nccl\" reduces device memory, but this run computes on the CPU "
                    "(run.device = \"" + device + "\"); use dist.backend = \"mpi\" (or \"auto\") on CPUs");

  int64_t sharing = 1;
  std::string gpu;
  if (d.cuda()) {
    if (!w.mpi_serialized)
      throw UserError("run.device = \"cuda\" calls MPI from LibTorch's autograd thread, but the MPI library "
                      "grants only thread level " + std::to_string(w.thread_level) +
                      " (below MPI_THREAD_SERIALIZED); use an MPI built with thread support "
                      "(OpenMPI, MPICH), or run.device = \"cpu\"");
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
  d.backend = resolve_backend(backend, d.cuda(), kNccl, most, w.size, &msg);
  if (!msg.empty()) log0("%s\n", msg.c_str());
  fail_on_first_rank(d.backend == "nccl" && sharing > 1,
                     std::to_string(sharing) + " ranks would share GPU " + gpu + " (" +
                         std::to_string(w.local_size) + " ranks on the node, " + std::to_string(d.visible_gpus) +
                         " GPU(s) visible to this one); NCCL needs one GPU per rank: start at most one rank per "
                         "GPU (srun --gpus-per-task=1), or share GPUs with dist.backend = \"mpi\" (or \"auto\")");
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
