#include "optim/zero.hpp"

#include <cmath>

#include "comm/world.hpp"

namespace vitkd {

ShardedAdamW::ShardedAdamW(FlatParams& flat, torch::nn::Module& module, Communicator& comm,
                           int rank, const BucketOptions& bopt)
    : flat_(flat), comm_(comm), sharded_(bopt.sharded), rank_(rank),
      shard_(bopt.sharded ? flat.shard(rank) : Shard{0, flat.padded}),
      opt_(shard_, flat.params.device(), bopt.kernel) {
  if (sharded_) {
    grad_shard_ = torch::zeros({shard_.size}, flat.params.options());
    buckets_ = std::make_unique<GradBuckets>(flat, module, comm, rank, grad_shard_.data_ptr<float>(), bopt);
    buckets_->begin();
  }
}

void ShardedAdamW::begin_backward() {
  if (buckets_) buckets_->begin();
}

MemoryFootprint ShardedAdamW::memory() const {
  const int64_t f32 = static_cast<int64_t>(sizeof(float));
  MemoryFootprint m;
  m.parameters = flat_.params.numel() * f32;
  m.gradients = (flat_.grads.numel() + (grad_shard_.defined() ? grad_shard_.numel() : 0)) * f32;
  m.optimizer = opt_.state_bytes();
  m.compute_copy = compute_ ? compute_->bytes() : 0;
  return m;
}

const ComputeWeights& ShardedAdamW::enable_compute_copy(const std::vector<torch::Tensor>& operands) {
  compute_ = std::make_unique<ComputeCopy>(flat_, operands);
  return compute_->weights();
}

void ShardedAdamW::parameters_changed() {
  if (compute_) compute_->refresh();
}

void ShardedAdamW::gather_fp32(PhaseTimes* times) {
  if (!compute_ || !sharded_) return;
  ScopedPhase ph(times, Phase::AllGather);
  comm_.all_gather(flat_.params.data_ptr<float>(), shard_.size);
}

int64_t ShardedAdamW::all_gather_bytes() const {
  if (!sharded_) return 0;
  return compute_ ? std::llround(compute_->gather_bytes()) : shard_.size * static_cast<int64_t>(sizeof(float));
}

int64_t ShardedAdamW::bucket_count() const { return buckets_ ? buckets_->count() : 1; }

double ShardedAdamW::step(const AdamWHyper& h, double clip, PhaseTimes* times) {
  return step_async(h, clip, times).item<double>();
}

torch::Tensor ShardedAdamW::step_async(const AdamWHyper& h, double clip, PhaseTimes* times) {
  const torch::Tensor grad = sharded_ ? grad_shard_ : flat_.grads;
  {
    ScopedPhase ph(times, Phase::CommWait);
    if (sharded_) {
      buckets_->finish();
    } else if (!comm_.allreduce_mean_on_device(flat_.grads.data_ptr<float>(), flat_.grads.numel())) {
      // MPI: through host memory (a device buffer is copied there and back).
      allreduce_sum_inplace(flat_.grads);
      flat_.grads.mul_(1.0f / static_cast<float>(world().size));
    }
  }
  torch::Tensor norm;
  {
    ScopedPhase ph(times, Phase::Optimizer);
    torch::Tensor sq = opt_.grad_sq_norm_tensor(grad);
    if (sharded_ && world().size > 1 &&
        !(sq.is_cuda() && comm_.allreduce_sum_on_device(sq.data_ptr<double>(), 1)))
      sq = torch::scalar_tensor(allreduce_sum(sq.item<double>()), sq.options());
    norm = sq.sqrt();
    const StepGate gate = clip_gate(norm, clip);
    // The host kernel: a non-finite norm returns here on every rank (the
    // same norm everywhere). The device implementation skips on the device.
    if (opt_.uses_kokkos() && !gate.apply.item<bool>()) return norm;
    opt_.step(flat_.params.narrow(0, shard_.offset, shard_.size), grad,
              flat_.decay_mask.narrow(0, shard_.offset, shard_.size), gate, h);
  }
  if (!sharded_ && !compute_) return norm;
  ScopedPhase ph(times, Phase::AllGather);
  if (!sharded_)
    compute_->refresh();
  else if (compute_)
    compute_->gather(comm_, shard_, rank_);
  else
    comm_.all_gather(flat_.params.data_ptr<float>(), shard_.size);
  return norm;
}

}  // namespace vitkd
