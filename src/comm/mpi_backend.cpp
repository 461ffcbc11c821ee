// The MPI gradient backend: reduce-scatter with MPI_Ireduce_scatter
// (progressed while backward runs), all-gather with MPI_Allgather. On device
// buffers every collective goes through host copies (pinned on CUDA).
#include <mpi.h>

#include <cstring>
#include <memory>

#ifdef VITKD_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#endif

#include "comm/backend.hpp"
#include "comm/world.hpp"
#include "util/bf16.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

// MPI has no bfloat16: a 2-byte contiguous type and a user-defined sum that
// adds in fp32 and rounds back to bf16 (what a bf16 reduction does).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// Bytes of `count` elements of `type`, as MPI sizes the type.
int64_t bytes_of(int64_t count, MPI_Datatype type) {
  int size = 0;
  VK_CHECK(MPI, MPI_Type_size(type, &size));
  return count * size;
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const CommPlacement& where) : where_(where) {
    where_.stage = where.stage || !where.device.is_cpu();
    VK_CHECK(MPI, MPI_Type_contiguous(2, MPI_BYTE, &bf16_type_));
    VK_CHECK(MPI, MPI_Type_commit(&bf16_type_));
    VK_CHECK(MPI, MPI_Op_create(&bf16_sum, /*commute=*/1, &bf16_op_));
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    MPI_Op_free(&bf16_op_);
    MPI_Type_free(&bf16_type_);
  }

  std::string name() const override { return choice_name(Backend::Mpi); }

  int start_reduce_scatter(const float* send, float* recv, const std::vector<int64_t>& counts,
                           WireType wire) override {
    const World& w = world();
    Request r;
    r.counts.assign(counts.begin(), counts.end());
    r.count = counts[w.rank];
    r.bf16 = wire == WireType::BF16;
    r.send = send;
    r.recv = recv;
    if (where_.stage) {
      // Device (or forced) staging: MPI works on host copies of the bucket
      // and of this rank's part; wait() copies the result back.
      int64_t n = 0;
      for (int64_t c : counts) n += c;
      r.device_recv = recv;
      r.host_recv = host_buffer(std::max<int64_t>(1, r.count));
      r.recv = r.host_recv.data_ptr<float>();
      r.host_send = host_buffer(n);
      r.send = r.host_send.data_ptr<float>();
#ifdef VITKD_TORCH_CUDA
      if (where_.device.is_cuda()) {
        // On a GPU the copy is queued behind the kernels that made the
        // gradients, and MPI starts once it has landed (progress() or
        // wait()), so the host does not block here, inside backward.
        r.host_send.copy_(on_device(send, n), /*non_blocking=*/true);
        r.copied = std::make_shared<at::cuda::CUDAEvent>();
        r.copied->record();
      }
#endif
      if (!r.copied) r.host_send.copy_(on_device(send, n));
    }
    requests_.push_back(std::move(r));
    launch_ready(/*block=*/false);
    return static_cast<int>(requests_.size()) - 1 + base_;
  }

  void progress() override {
    launch_ready(/*block=*/false);
    for (auto& r : requests_) {
      if (r.req == MPI_REQUEST_NULL) continue;
      int done = 0;
      VK_CHECK(MPI, MPI_Test(&r.req, &done, MPI_STATUS_IGNORE));
    }
  }

  void wait(int id) override {
    Request& r = requests_.at(id - base_);
    while (!r.launched) launch_ready(/*block=*/true);
    if (r.req != MPI_REQUEST_NULL) VK_CHECK(MPI, MPI_Wait(&r.req, MPI_STATUS_IGNORE));
    if (!r.finished) {
      const float inv = 1.0f / static_cast<float>(world().size);
      if (r.bf16)
        for (int64_t i = 0; i < r.count; ++i) r.recv[i] = bf16_to_float(r.recv16[i]) * inv;
      else
        for (int64_t i = 0; i < r.count; ++i) r.recv[i] *= inv;
      // From page-locked memory the copy back is queued without blocking;
      // the caching host allocator keeps the buffer until it has run.
      if (r.device_recv && r.count > 0)
        on_device(r.device_recv, r.count).copy_(r.host_recv.narrow(0, 0, r.count), /*non_blocking=*/true);
      r.finished = true;
    }
    // Forget requests once all are finished, so ids stay small per step.
    bool all = true;
    for (auto& q : requests_) all &= q.finished;
    if (all) {
      base_ += static_cast<int>(requests_.size());
      requests_.clear();
    }
  }

  void all_gather(float* buf, int64_t count) override { gather(buf, count, torch::kFloat32, MPI_FLOAT); }
  void all_gather_bf16(uint16_t* buf, int64_t count) override { gather(buf, count, torch::kBFloat16, bf16_type_); }
  void all_gather_v(float* buf, const std::vector<int64_t>& counts) override {
    const World& w = world();
    std::vector<int> n(counts.begin(), counts.end()), at(counts.size(), 0);
    for (size_t r = 1; r < n.size(); ++r) at[r] = at[r - 1] + n[r - 1];
    const int64_t total = at.back() + n.back();
    torch::Tensor host;
    float* target = buf;
    if (where_.stage) {
      host = host_buffer(total);
      host.narrow(0, at[w.rank], n[w.rank]).copy_(on_device(buf + at[w.rank], n[w.rank]));
      target = host.data_ptr<float>();
    }
    VK_CHECK(MPI, MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, target, n.data(), at.data(), MPI_FLOAT,
                                 MPI_COMM_WORLD));
    if (where_.stage) on_device(buf, total).copy_(host);
    bytes_sent_ += bytes_of(n[w.rank], MPI_FLOAT);
  }

 private:
  struct Request {
    MPI_Request req = MPI_REQUEST_NULL;
    const float* send = nullptr;  // what MPI sends (the host copy with staging)
    float* recv = nullptr;
    std::vector<int> counts;      // recvcounts of MPI_Ireduce_scatter
    int64_t count = 0;
    bool bf16 = false, launched = false, finished = false;
    std::vector<uint16_t> send16, recv16;  // bf16 staging
    float* device_recv = nullptr;          // with staging: where the result goes
    torch::Tensor host_send, host_recv;    // with staging: host copies
#ifdef VITKD_TORCH_CUDA
    std::shared_ptr<at::cuda::CUDAEvent> copied;  // on a GPU: the device-to-host copy of the bucket is done
#else
    std::shared_ptr<int> copied;  // never set without CUDA
#endif
  };

  /// Whether request r's send buffer holds the bucket (after its copy to the
  /// host, on a GPU); with `block` it waits for the copy.
  static bool send_ready(Request& r, bool block) {
#ifdef VITKD_TORCH_CUDA
    if (r.copied) {
      if (block) r.copied->synchronize();
      return block || r.copied->query();
    }
#endif
    (void)block;
    (void)r;
    return true;
  }

  /// Starts the MPI calls of the requests whose data is ready, in the order
  /// they were made (every rank starts its collectives in the same order);
  /// with `block`, at least the first one not yet started.
  void launch_ready(bool block) {
    for (auto& r : requests_) {
      if (r.launched) continue;
      if (!send_ready(r, block)) return;
      launch(r);
      block = false;
    }
  }

  void launch(Request& r) {
    int64_t total = 0;
    for (int c : r.counts) total += c;  // the send buffer: sum(recvcounts) elements
    if (r.bf16) {
      r.send16.resize(total);
      r.recv16.resize(std::max<int64_t>(1, r.count));
      for (int64_t i = 0; i < total; ++i) r.send16[i] = float_to_bf16(r.send[i]);
      VK_CHECK(MPI, MPI_Ireduce_scatter(r.send16.data(), r.recv16.data(), r.counts.data(), bf16_type_,
                                        bf16_op_, MPI_COMM_WORLD, &r.req));
      bytes_sent_ += bytes_of(total, bf16_type_);
    } else {
      VK_CHECK(MPI, MPI_Ireduce_scatter(r.send, r.recv, r.counts.data(), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD, &r.req));
      bytes_sent_ += bytes_of(total, MPI_FLOAT);
    }
    r.launched = true;
  }

  /// In place: rank r's `count` elements of `dtype` (MPI type `type`) at
  /// buf + r*count are gathered on every rank; device memory goes through a
  /// host copy, of which only this rank's block goes down.
  void gather(void* buf, int64_t count, torch::ScalarType dtype, MPI_Datatype type) {
    const int64_t n = count * world().size;
    const auto opts = torch::TensorOptions().dtype(dtype);
    torch::Tensor host;
    void* target = buf;
    if (where_.stage) {
      host = torch::empty({n}, opts.pinned_memory(!where_.device.is_cpu()));
      const int64_t mine = count * world().rank;
      host.narrow(0, mine, count).copy_(torch::from_blob(buf, {n}, opts.device(where_.device)).narrow(0, mine, count));
      target = host.data_ptr();
    }
    // In place: this rank's block is `count` elements of the receive type.
    VK_CHECK(MPI, MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, target, static_cast<int>(count), type,
                                MPI_COMM_WORLD));
    if (where_.stage) torch::from_blob(buf, {n}, opts.device(where_.device)).copy_(host);
    bytes_sent_ += bytes_of(count, type);
  }

  /// `n` floats of host memory, page-locked when the buffers are on a GPU
  /// (so the copies run at full speed).
  torch::Tensor host_buffer(int64_t n) const {
    return torch::empty({n}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(!where_.device.is_cpu()));
  }
  /// The buffers' memory at `p` as a tensor (no copy).
  torch::Tensor on_device(const float* p, int64_t n) const {
    return torch::from_blob(const_cast<float*>(p), {n},
                            torch::TensorOptions().dtype(torch::kFloat32).device(where_.device));
  }

  CommPlacement where_;
  std::vector<Request> requests_;
  int base_ = 0;
  MPI_Datatype bf16_type_ = MPI_DATATYPE_NULL;
  MPI_Op bf16_op_ = MPI_OP_NULL;
};

}  // namespace

void register_mpi_backend() {
  BackendTraits t;
  t.id = Backend::Mpi;
  t.local_at_one_rank = true;  // one rank: a copy and a scale by 1, as Local does
  t.auto_preference = 0;
  t.make = [](const CommPlacement& where) -> std::unique_ptr<Communicator> {
    return std::make_unique<MpiCommunicator>(where);
  };
  register_backend(t);
}

}  // namespace vitkd
