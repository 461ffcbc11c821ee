// The NCCL communication backend (built only when CUDA and NCCL are found,
// see cmake/VitkdNccl.cmake). All buffers handed to it are device pointers.
//
// Rendezvous goes through MPI: every rank selects the GPU given by its
// node-local rank, rank 0 creates the NCCL unique id, MPI_Bcast spreads it,
// and every rank joins with ncclCommInitRank.
//
// Streams. Collectives run on a dedicated non-blocking communication stream.
// The compute stream is the legacy default stream (cudaStreamLegacy): this
// file is compiled without CUDA LibTorch, so LibTorch's current stream is not
// reachable from here. Because the communication stream is non-blocking it
// does not synchronize implicitly with the legacy stream, so ordering is
// explicit:
//   * before collectives are enqueued, an event is recorded on the compute
//     stream and the communication stream waits for it (the gradients/shards
//     written by compute are complete before NCCL reads them);
//   * each reduce-scatter request records a completion event on the
//     communication stream; wait(id) makes the compute stream wait for it and
//     then also synchronizes the host with that event. The host-side sync is
//     deliberate: the sharded optimizer may read `recv` from the host (or
//     launch work on a stream we cannot see), and the interface promises that
//     the result "is in recv" when wait() returns.
//   * all_gather is blocking: it synchronizes the communication stream
//     before returning.
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "comm/nccl_check.hpp"
#include "comm/world.hpp"
#include "util/error.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "the NCCL backend needs NCCL >= 2.10 (ncclAvg, ncclBfloat16)"
#endif

namespace vitkd {

cudaError_t check_CUDA(cudaError_t rc, const char* expr, const char* file, int line) {
  if (rc == cudaSuccess) return rc;
  check_failed("CUDA", expr, file, line, cudaGetErrorString(rc));
}

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

/// cudaGetDeviceCount, mapping every failure (no driver, no device,
/// driver too old) to 0 devices and clearing CUDA's sticky last error.
/// `why` (optional) receives the CUDA error string, or a short note.
int device_count_or_reason(std::string* why) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why) *why = cudaGetErrorString(rc);
    (void)cudaGetLastError();  // clear the error state for later CUDA calls
    return 0;
  }
  if (n <= 0 && why) *why = "0 devices";
  return n > 0 ? n : 0;
}

[[noreturn]] void internal_error(const std::string& msg) {
  die(kExitRuntime, "internal error in the NCCL backend: " + msg);
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(int device_count) {
    const World& w = world();
    device_ = w.local_rank % device_count;
    VK_CHECK(CUDA, cudaSetDevice(device_));

    ncclUniqueId id;
    if (w.rank == 0) VK_CHECK(NCCL, ncclGetUniqueId(&id));
    VK_CHECK(MPI, MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD));
    VK_CHECK(NCCL, ncclCommInitRank(&comm_, w.size, id, w.rank));

    VK_CHECK(CUDA, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    VK_CHECK(CUDA, cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  }

  ~NcclCommunicator() override {
    // No throwing and no aborting here: results are ignored on purpose.
    if (stream_) (void)cudaStreamSynchronize(stream_);
    for (Slot& s : slots_)
      if (s.done) (void)cudaEventDestroy(s.done);
    if (compute_ready_) (void)cudaEventDestroy(compute_ready_);
    if (comm_) (void)ncclCommDestroy(comm_);
    if (stream_) (void)cudaStreamDestroy(stream_);
  }

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  std::string name() const override { return "nccl"; }

  int start_reduce_scatter(const float* send, float* recv, const std::vector<int64_t>& counts,
                           WireType wire) override {
    const World& w = world();
    const int P = w.size;
    const int me = w.rank;
    if (static_cast<int>(counts.size()) != P)
      internal_error("start_reduce_scatter got " + std::to_string(counts.size()) +
                     " counts for a world of " + std::to_string(P) + " ranks");
    if (wire == WireType::BF16) {
      // Not implemented: bf16 on the wire needs fp32<->bf16 conversion
      // kernels on the device, and this file is compiled by the host C++
      // compiler (no nvcc). Every rank reaches this with the same
      // configuration, so the error is collective.
      throw UserError(
          "precision.reduce = \"bf16\" is not implemented for dist.backend = \"nccl\" yet; "
          "set precision.reduce = \"fp32\" or use dist.backend = \"mpi\"",
          /*collective=*/true);
    }

    int64_t total = 0;
    for (int64_t c : counts) {
      if (c < 0) internal_error("negative count in start_reduce_scatter");
      total += c;
    }

    order_after_compute();

    // One ncclReduce per destination rank: rank r's part of the bucket is
    // averaged onto rank r. Inside a group NCCL runs them as one operation.
    // recvbuff is only used at the root (nccl.h: "recvbuff may be NULL on
    // all calls except for root device").
    VK_CHECK(NCCL, ncclGroupStart());
    int64_t off = 0;
    for (int r = 0; r < P; ++r) {
      const int64_t c = counts[static_cast<size_t>(r)];
      if (c > 0)
        VK_CHECK(NCCL, ncclReduce(send + off, r == me ? static_cast<void*>(recv) : nullptr,
                                  static_cast<size_t>(c), ncclFloat32, ncclAvg, r, comm_,
                                  stream_));
      off += c;
    }
    VK_CHECK(NCCL, ncclGroupEnd());

    const int id = acquire_slot();
    VK_CHECK(CUDA, cudaEventRecord(slots_[static_cast<size_t>(id)].done, stream_));

    // The bytes handed to NCCL: the bucket's fp32 elements, over the P calls.
    bytes_sent_ += total * static_cast<int64_t>(sizeof(float));
    return id;
  }

  // NCCL kernels progress on the device by themselves.
  void progress() override {}

  void wait(int id) override {
    if (id < 0 || static_cast<size_t>(id) >= slots_.size() ||
        !slots_[static_cast<size_t>(id)].busy)
      internal_error("wait() on unknown request " + std::to_string(id));
    Slot& s = slots_[static_cast<size_t>(id)];
    // Device-side ordering for later compute work, then a host-side sync so
    // the result is also visible to host code (see the file comment).
    VK_CHECK(CUDA, cudaStreamWaitEvent(cudaStreamLegacy, s.done, 0));
    VK_CHECK(CUDA, cudaEventSynchronize(s.done));
    s.busy = false;
    free_.push_back(id);
  }

  void all_gather(float* buf, int64_t count) override {
    const World& w = world();
    if (count < 0) internal_error("negative count in all_gather");
    if (count == 0) return;
    order_after_compute();
    // In place: sendbuff == recvbuff + rank*sendcount.
    VK_CHECK(NCCL, ncclAllGather(buf + static_cast<int64_t>(w.rank) * count, buf,
                                 static_cast<size_t>(count), ncclFloat32, comm_, stream_));
    VK_CHECK(CUDA, cudaStreamSynchronize(stream_));
    bytes_sent_ += count * static_cast<int64_t>(sizeof(float));  // the send count handed to NCCL
  }

 private:
  struct Slot {
    cudaEvent_t done = nullptr;
    bool busy = false;
  };

  /// Makes the communication stream wait for all work enqueued so far on
  /// the compute stream.
  void order_after_compute() {
    VK_CHECK(CUDA, cudaEventRecord(compute_ready_, cudaStreamLegacy));
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
  cudaEvent_t compute_ready_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<int> free_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator() {
  std::string why;
  const int n = device_count_or_reason(&why);
  if (n == 0) {
    // Not collective: GPU visibility can differ between hosts.
    throw UserError("dist.backend = \"nccl\" needs a CUDA GPU, but none is visible on host " +
                        world().host + " (cudaGetDeviceCount: " + why +
                        "); use dist.backend = \"mpi\" or run on GPU nodes",
                    /*collective=*/false);
  }
  return std::make_unique<NcclCommunicator>(n);
}

}  // namespace vitkd
