// The NCCL communication backend (built only when CUDA and NCCL are found,
// see cmake/backends/nccl.cmake). All buffers handed to it are device memory of
// the GPU that select_device() (comm/device.hpp) made current.
//
// Rendezvous goes through MPI: rank 0 creates the NCCL unique id, MPI_Bcast
// spreads it, and every rank joins with ncclCommInitRank.
//
// Collectives. A bucket whose ranks' parts are all the same size (the whole
// padded buffer, e.g. one bucket for the model) is one ncclReduceScatter; a
// bucket inside one rank's shard is one ncclReduce to that rank; a bucket
// across a shard boundary is one group of ncclReduce calls, one per rank it
// touches. All use ncclAvg. Parameters come back with one ncclAllGather.
// precision.reduce = "bf16" converts the bucket to a bf16 copy first (a
// LibTorch kernel on the compute stream) and reduces it as ncclBfloat16.
//
// Streams. Collectives run on a dedicated non-blocking communication stream,
// ordered against the compute stream with events and never by blocking the
// host: before a collective, an event recorded on the compute stream makes
// the communication stream wait; wait(id) and all_gather() make the compute
// stream wait for the collective's completion event. The compute stream is
// LibTorch's current stream when LibTorch has CUDA (VITKD_TORCH_CUDA), else
// the legacy default stream, which is LibTorch's default too. The host waits
// only where it reads a result (the gradient norm's .item()).
#include <mpi.h>
#include <torch/torch.h>

#ifdef VITKD_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/backend.hpp"
#include "comm/cuda_runtime.hpp"
#include "comm/nccl_check.hpp"
#include "comm/world.hpp"
#include "util/error.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "the NCCL backend needs NCCL >= 2.10 (ncclAvg, ncclBfloat16)"
#endif

namespace vitkd {

ncclResult_t check_NCCL(ncclResult_t rc, const char* expr, const char* file, int line) {
  if (rc == ncclSuccess) return rc;
  std::string detail = ncclGetErrorString(rc);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  // NCCL's own description of the last failure (comm is unused; may be null).
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) detail += std::string(" (") + last + ")";
#endif
  check_failed("NCCL", expr, file, line, detail);
}

namespace {

[[noreturn]] void internal_error(const std::string& msg) {
  die(kExitRuntime, "internal error in the NCCL backend: " + msg);
}

/// The stream LibTorch computes on.
cudaStream_t compute_stream() {
#ifdef VITKD_TORCH_CUDA
  return c10::cuda::getCurrentCUDAStream().stream();
#else
  return cudaStreamLegacy;
#endif
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(int device) : device_(device) {
    const World& w = world();
    ncclUniqueId id;
    if (w.rank == 0) VK_CHECK(NCCL, ncclGetUniqueId(&id));
    VK_CHECK(MPI, MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD));
    VK_CHECK(NCCL, ncclCommInitRank(&comm_, w.size, id, w.rank));
    VK_CHECK(CUDA, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    VK_CHECK(CUDA, cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
    VK_CHECK(CUDA, cudaEventCreateWithFlags(&gathered_, cudaEventDisableTiming));
  }

  ~NcclCommunicator() override {
    // No throwing and no aborting here: results are ignored on purpose.
    if (stream_) (void)cudaStreamSynchronize(stream_);
    for (Slot& s : slots_)
      if (s.done) (void)cudaEventDestroy(s.done);
    if (compute_ready_) (void)cudaEventDestroy(compute_ready_);
    if (gathered_) (void)cudaEventDestroy(gathered_);
    if (comm_) (void)ncclCommDestroy(comm_);
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override { return choice_name(Backend::Nccl); }

  int start_reduce_scatter(const float* send, float* recv, const std::vector<int64_t>& counts,
                           WireType wire) override {
    const World& w = world();
    const int P = w.size;
    if (static_cast<int>(counts.size()) != P)
      internal_error("start_reduce_scatter got " + std::to_string(counts.size()) +
                     " counts for a world of " + std::to_string(P) + " ranks");
    int64_t total = 0;
    bool equal = true;
    for (int64_t c : counts) {
      if (c < 0) internal_error("negative count in start_reduce_scatter");
      total += c;
      equal &= c == counts[0];
    }
    const int id = acquire_slot();
    Slot& s = slots_[static_cast<size_t>(id)];
    s.recv = recv;
    s.count = counts[static_cast<size_t>(w.rank)];
    s.bf16 = wire == WireType::BF16;

    const void* sendbuf = send;
    void* recvbuf = recv;
    ncclDataType_t type = ncclFloat32;
    if (s.bf16) {
      // Narrow on the compute stream, before the event the collective waits for.
      const auto dev = torch::TensorOptions().device(torch::kCUDA, device_);
      s.send16 = torch::from_blob(const_cast<float*>(send), {total}, dev.dtype(torch::kFloat32))
                     .to(torch::kBFloat16);
      s.recv16 = torch::empty({std::max<int64_t>(1, s.count)}, dev.dtype(torch::kBFloat16));
      sendbuf = s.send16.data_ptr();
      recvbuf = s.recv16.data_ptr();
      type = ncclBfloat16;
    }
    const size_t elem = s.bf16 ? 2 : 4;
    order_after_compute();
    if (equal) {
      VK_CHECK(NCCL, ncclReduceScatter(sendbuf, recvbuf, static_cast<size_t>(counts[0]), type, ncclAvg,
                                       comm_, stream_));
    } else {
      // Rank r's part of the bucket is averaged onto rank r; recvbuff is
      // used only at the root (nccl.h).
      VK_CHECK(NCCL, ncclGroupStart());
      size_t off = 0;
      for (int r = 0; r < P; ++r) {
        const int64_t c = counts[static_cast<size_t>(r)];
        if (c > 0)
          VK_CHECK(NCCL, ncclReduce(static_cast<const char*>(sendbuf) + off * elem,
                                    r == w.rank ? recvbuf : nullptr, static_cast<size_t>(c), type,
                                    ncclAvg, r, comm_, stream_));
        off += static_cast<size_t>(c);
      }
      VK_CHECK(NCCL, ncclGroupEnd());
    }
    VK_CHECK(CUDA, cudaEventRecord(s.done, stream_));
    // The bytes handed to NCCL: the whole send buffer in the wire type.
    bytes_sent_ += total * static_cast<int64_t>(elem);
    return id;
  }

  // NCCL kernels progress on the device by themselves.
  void progress() override {}

  void wait(int id) override {
    if (id < 0 || static_cast<size_t>(id) >= slots_.size() || !slots_[static_cast<size_t>(id)].busy)
      internal_error("wait() on unknown request " + std::to_string(id));
    Slot& s = slots_[static_cast<size_t>(id)];
    // Device-side ordering only: later compute work (the optimizer) starts
    // after the collective; the host does not block.
    VK_CHECK(CUDA, cudaStreamWaitEvent(compute_stream(), s.done, 0));
    if (s.bf16 && s.count > 0) {
      const auto f32 = torch::TensorOptions().device(torch::kCUDA, device_).dtype(torch::kFloat32);
      torch::from_blob(s.recv, {s.count}, f32).copy_(s.recv16.narrow(0, 0, s.count));
    }
    // The bf16 copies stay referenced until the slot is reused: the kernels
    // that read them are ordered before any later use on the compute stream.
    s.busy = false;
    free_.push_back(id);
  }

  bool allreduce_mean_on_device(float* buf, int64_t count) override {
    allreduce_in_place(buf, count, ncclFloat32, ncclAvg, "allreduce_mean_on_device");
    bytes_sent_ += count * static_cast<int64_t>(sizeof(float));
    return true;
  }
  bool allreduce_sum_on_device(double* buf, int64_t count) override {
    allreduce_in_place(buf, count, ncclFloat64, ncclSum, "allreduce_sum_on_device");
    return true;
  }
  void all_gather(float* buf, int64_t count) override { gather(buf, count, ncclFloat32, sizeof(float)); }
  void all_gather_bf16(uint16_t* buf, int64_t count) override { gather(buf, count, ncclBfloat16, 2); }
  // NCCL has no all-gather of uneven blocks: one broadcast per rank, grouped.
  void all_gather_v(float* buf, const std::vector<int64_t>& counts) override {
    const World& w = world();
    order_after_compute();
    VK_CHECK(NCCL, ncclGroupStart());
    int64_t at = 0;
    for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
      if (counts[r] > 0)
        VK_CHECK(NCCL, ncclBroadcast(buf + at, buf + at, static_cast<size_t>(counts[r]), ncclFloat32, r, comm_, stream_));
      at += counts[r];
    }
    VK_CHECK(NCCL, ncclGroupEnd());
    VK_CHECK(CUDA, cudaEventRecord(gathered_, stream_));
    VK_CHECK(CUDA, cudaStreamWaitEvent(compute_stream(), gathered_, 0));
    bytes_sent_ += counts[w.rank] * static_cast<int64_t>(sizeof(float));
  }

 private:
  // In place on the collective stream (sendbuff == recvbuff + rank*count
  // elements of `elem` bytes), the compute stream waiting for it.
  void gather(void* buf, int64_t count, ncclDataType_t type, size_t elem) {
    const World& w = world();
    if (count < 0) internal_error("negative count in all_gather");
    if (count == 0) return;
    order_after_compute();
    char* base = static_cast<char*>(buf);
    VK_CHECK(NCCL, ncclAllGather(base + static_cast<int64_t>(w.rank) * count * static_cast<int64_t>(elem), base,
                                 static_cast<size_t>(count), type, comm_, stream_));
    VK_CHECK(CUDA, cudaEventRecord(gathered_, stream_));
    VK_CHECK(CUDA, cudaStreamWaitEvent(compute_stream(), gathered_, 0));
    bytes_sent_ += count * static_cast<int64_t>(elem);  // the send count handed to NCCL
  }
  // In place on the collective stream, ordered after the compute stream's
  // work; the compute stream waits for it on the device (the optimizer reads it).
  void allreduce_in_place(void* buf, int64_t count, ncclDataType_t type, ncclRedOp_t op, const char* who) {
    if (count < 0) internal_error(std::string("negative count in ") + who);
    if (count == 0) return;
    order_after_compute();
    VK_CHECK(NCCL, ncclAllReduce(buf, buf, static_cast<size_t>(count), type, op, comm_, stream_));
    VK_CHECK(CUDA, cudaEventRecord(gathered_, stream_));
    VK_CHECK(CUDA, cudaStreamWaitEvent(compute_stream(), gathered_, 0));
  }

  struct Slot {
    cudaEvent_t done = nullptr;
    bool busy = false, bf16 = false;
    float* recv = nullptr;
    int64_t count = 0;
    torch::Tensor send16, recv16;  ///< bf16 wire copies (precision.reduce = "bf16")
  };

  /// Makes the communication stream wait for all work enqueued so far on
  /// the compute stream.
  void order_after_compute() {
    VK_CHECK(CUDA, cudaEventRecord(compute_ready_, compute_stream()));
    VK_CHECK(CUDA, cudaStreamWaitEvent(stream_, compute_ready_, 0));
  }

  /// A free request slot (its completion event is reused across requests).
  int acquire_slot() {
    int id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      Slot s;
      VK_CHECK(CUDA, cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      slots_.push_back(s);
      id = static_cast<int>(slots_.size()) - 1;
    }
    slots_[static_cast<size_t>(id)].busy = true;
    return id;
  }

  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr, gathered_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<int> free_;
};

}  // namespace

void register_nccl_backend() {
  BackendTraits t;
  t.id = Backend::Nccl;
  t.needs_cuda = true;
  t.one_gpu_per_rank = true;
  t.auto_preference = 10;  // on GPUs, one rank per GPU: NCCL before MPI
  t.make = [](const CommPlacement& where) -> std::unique_ptr<Communicator> {
    return std::make_unique<NcclCommunicator>(where.device.index());
  };
  register_backend(t);
}

}  // namespace vitkd
