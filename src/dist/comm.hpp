#pragma once
// Gradient and parameter communication for the sharded optimizer.
// Counts are element counts; buffers are the flat fp32 buffers of FlatParams.
#include <cstdint>
#include <memory>
#include <string>

namespace vitkd {

/// Communication backend over all ranks (MPI on CPUs; NCCL on GPUs, issue 3).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;
  /// Reduce-scatter with averaging: `send` holds world*count elements (the
  /// whole padded buffer); rank r receives the mean over ranks of elements
  /// [r*count, (r+1)*count) in `recv` (count elements).
  virtual void reduce_scatter_avg(const float* send, float* recv, int64_t count) = 0;
  /// In-place all-gather: rank r's `count` elements sit at buf + r*count;
  /// afterwards every rank holds all world*count elements.
  virtual void all_gather(float* buf, int64_t count) = 0;
  /// Bytes this rank has sent so far (per the ring algorithm's volume:
  /// (P-1)/P of the buffer for each reduce-scatter and all-gather).
  int64_t bytes_sent() const { return bytes_sent_; }

 protected:
  int64_t bytes_sent_ = 0;
};

/// backend: "mpi" (or "auto" on a machine without GPUs).
std::unique_ptr<Communicator> make_communicator(const std::string& backend);

}  // namespace vitkd
