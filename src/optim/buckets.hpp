#pragma once
// Gradient buckets that start their reduce-scatter during backward.
//
// The flat gradient buffer is cut into contiguous buckets of about
// `bucket_bytes`, on parameter boundaries, from the end of the buffer
// backwards (backward produces the last layers' gradients first), and at
// every shard boundary unless one bucket holds the whole buffer: a bucket is
// either inside one rank's shard (its reduce-scatter is a reduce to that
// rank, one ncclReduce) or the whole buffer (one ncclReduceScatter). A
// post-hook on each parameter's gradient accumulator counts down the
// bucket(s) it overlaps; when a bucket is complete its reduce-scatter starts. Buckets are always launched
// in index order (0, 1, 2, ...), so every rank issues the same collectives in
// the same order whatever order autograd finishes them in; finish() launches
// what is left (e.g. on a rank without samples in this step) and waits.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {

struct BucketOptions {
  int64_t bucket_bytes = 25 << 20;  ///< target bucket size (fp32 bytes)
  WireType wire = WireType::F32;    ///< gradient element type on the wire
  bool overlap = true;              ///< start buckets from autograd hooks
  bool sharded = true;              ///< false: plain data parallel (allreduce, full AdamW on every rank)
  AdamWKernel kernel = AdamWKernel::Auto;  ///< which AdamW implementation (optim/adamw.hpp)
};

class GradBuckets {
 public:
  /// `module` must be the module whose parameters `flat` holds.
  GradBuckets(FlatParams& flat, torch::nn::Module& module, Communicator& comm, int rank,
              float* grad_shard, const BucketOptions& opt);
  ~GradBuckets();

  /// Re-arms the buckets; call before each backward.
  void begin();
  /// Launches the remaining buckets in order and waits for all of them; the
  /// averaged gradient of this rank's shard is then in `grad_shard`.
  void finish();

  int64_t count() const { return static_cast<int64_t>(buckets_.size()); }
  /// Each bucket's range of the flat buffer, in launch order.
  std::vector<Shard> ranges() const {
    std::vector<Shard> r;
    for (const Bucket& b : buckets_) r.push_back({b.begin, b.end - b.begin});
    return r;
  }
  /// Buckets launched from hooks (i.e. during backward) in the last step.
  int64_t launched_in_backward() const { return launched_in_backward_; }

  /// Called by the hooks (public for them only).
  void on_param_ready(size_t bucket);

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;   ///< range in the flat buffer (elements)
    std::vector<int64_t> counts;  ///< per-rank share of the range
    int64_t recv_offset = 0;      ///< where this rank's share goes in grad_shard
    int params = 0, pending = 0;
    bool launched = false;
    int request = -1;
  };
  void launch_ready_in_order();
  void launch(Bucket& b);

  FlatParams& flat_;
  Communicator& comm_;
  int rank_;
  float* grad_shard_;
  BucketOptions opt_;
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  bool in_backward_ = false;
  int64_t launched_in_backward_ = 0;
  std::vector<GradAccumulatorPtr> accumulators_;  ///< kept alive for the hooks
};

}  // namespace vitkd
