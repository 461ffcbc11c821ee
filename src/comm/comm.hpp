#pragma once
// Gradient and parameter communication for the sharded optimizer.
//
// Buffers are the flat buffers of FlatParams; counts are element counts.
// The flat buffer is split into contiguous buckets (dist.bucket_mb). A
// bucket [b0, b1) overlaps the shards of one or a few ranks; its
// reduce-scatter sends each rank the part of the bucket inside that rank's
// shard (`counts[r]` elements, in rank order, summing to b1 - b0), averaged
// over ranks. Done for every bucket, this is exactly one reduce-scatter of the
// whole padded buffer, so the volume equals the unbucketed one.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace vitkd {

/// Element type on the wire for gradient reduction.
enum class WireType { F32, BF16 };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;

  /// Starts the averaged reduce-scatter of one bucket: `send` points at the
  /// bucket's first element (sum(counts) floats); this rank receives
  /// counts[rank] floats into `recv`. With WireType::BF16 the values travel
  /// and are summed as bfloat16 (rounded to nearest even), then widened into
  /// `recv`. Returns a request id for wait(). `send` and `recv` must stay
  /// valid and unmodified until wait() returns.
  virtual int start_reduce_scatter(const float* send, float* recv,
                                   const std::vector<int64_t>& counts, WireType wire) = 0;
  /// Drives outstanding requests forward without blocking (call it often
  /// while computing, e.g. from autograd hooks).
  virtual void progress() {}
  /// Blocks until request `id` is complete and its result is in `recv`.
  virtual void wait(int id) = 0;

  /// In-place all-gather: rank r's `count` elements sit at buf + r*count;
  /// afterwards every rank holds all world*count elements.
  virtual void all_gather(float* buf, int64_t count) = 0;
  /// The same in-place all-gather of bfloat16 values (their 16-bit
  /// patterns): a bf16 run's copy of the parameters (precision.gather,
  /// optim/compute_copy.hpp), half the bytes.
  virtual void all_gather_bf16(uint16_t* buf, int64_t count) = 0;
  /// In-place all-gather of blocks of different lengths: rank r's counts[r]
  /// floats sit at buf + counts[0] + ... + counts[r-1]; afterwards every
  /// rank holds all of them (the fp32 elements beside a compute copy).
  virtual void all_gather_v(float* buf, const std::vector<int64_t>& counts) = 0;

  /// In-place average over ranks of `count` floats at `buf` (the unsharded
  /// gradient, dist.sharding = "none") on the device, without the host
  /// waiting; false when this backend has no such path (MPI: the caller
  /// reduces through host memory, allreduce_sum_inplace below).
  virtual bool allreduce_mean_on_device(float* buf, int64_t count) {
    (void)buf;
    (void)count;
    return false;
  }
  /// In-place sum over ranks of `count` doubles at `buf` (the squared
  /// gradient norm) on the device, ordered after the compute stream's work
  /// and before its next, without the host waiting; false when this backend
  /// has no such path (MPI: the caller sums through host memory).
  virtual bool allreduce_sum_on_device(double* buf, int64_t count) {
    (void)buf;
    (void)count;
    return false;
  }

  /// Bytes of this rank's data handed to the communication library, from
  /// the count and datatype arguments of each call: the whole send buffer of
  /// each reduce-scatter (sum(counts) elements of the wire type: 4 bytes
  /// each, 2 with bf16) and this rank's block of each all-gather (`count`
  /// elements: 4 bytes each, 2 with all_gather_bf16). How many bytes then
  /// cross the network depends on the library's algorithm (a ring
  /// reduce-scatter sends (P-1)/P of the buffer); this counts what this rank
  /// handed over.
  int64_t bytes_sent() const { return bytes_sent_; }

 protected:
  int64_t bytes_sent_ = 0;
};

/// Where a communicator's buffers live and how MPI reaches them.
struct CommPlacement {
  torch::Device device{torch::kCPU};  ///< the flat buffers' device
  /// MPI on device memory copies each buffer through host memory (pinned on
  /// CUDA) around the MPI call. Always on for CUDA buffers with MPI; on the
  /// CPU it can be forced, so that tests exercise the staging path.
  bool stage = false;
};

/// Sum of a float32 tensor over all ranks, in place, on any device (device
/// memory goes through a host copy). Collective, blocking.
void allreduce_sum_inplace(const torch::Tensor& t);
/// Rank `root`'s values of a float32 tensor on every rank, on any device.
/// Collective, blocking.
void broadcast_tensor(const torch::Tensor& t, int root);

/// The communicator of a built backend (comm/backend.hpp), as resolved by
/// select_device (comm/device.hpp); Auto is taken as Mpi for callers without
/// a device choice (benchmarks, tests). Throws UserError when the request
/// cannot be met (a backend this vitkd was built without, a CUDA-only
/// backend on CPU buffers).
std::unique_ptr<Communicator> make_communicator(Backend backend,
                                                const CommPlacement& where = CommPlacement());


}  // namespace vitkd
