#include "optim/buckets.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>

#include "util/error.hpp"

namespace vitkd {
namespace {

// Runs after AccumulateGrad wrote the gradient into the flat buffer's view.
struct BucketHook final : torch::autograd::FunctionPostHook {
  BucketHook(GradBuckets* b, size_t bucket) : owner(b), index(bucket) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    owner->on_param_ready(index);
    return outputs;
  }
  GradBuckets* owner;
  size_t index;
};

}  // namespace

GradBuckets::GradBuckets(FlatParams& flat, torch::nn::Module& module, Communicator& comm, int rank,
                         float* grad_shard, const BucketOptions& opt)
    : flat_(flat), comm_(comm), rank_(rank), grad_shard_(grad_shard), opt_(opt) {
  const int64_t target = std::max<int64_t>(1, opt.bucket_bytes / 4);
  // Walk the parameters from the last one; bucket 0 ends at the padded end.
  // A bucket closes at a parameter boundary once it holds `target` elements,
  // and, unless one bucket takes the whole buffer, at every shard boundary:
  // each bucket then lies inside one rank's shard (one reduce to that rank)
  // or is the whole buffer (one reduce-scatter).
  const bool whole = target >= flat.padded;
  const int64_t S = flat.padded / flat.world_size;
  int64_t end = flat.padded;
  auto close = [&](int64_t begin) {
    Bucket b;
    b.begin = begin;
    b.end = end;
    buckets_.push_back(b);
    end = begin;
  };
  for (size_t k = flat.slots.size(); k-- > 0;) {
    const int64_t lo = k == 0 ? 0 : flat.slots[k].offset;
    if (!whole)
      for (int64_t B = (end - 1) / S * S; B > lo; B -= S) close(B);  // shard boundaries inside (lo, end)
    if (end - lo >= target || k == 0) close(lo);
  }
  if (buckets_.empty()) close(0);  // a module without parameters: the padding alone
  // Which buckets each parameter's gradient completes (two or more when it
  // spans a shard boundary).
  std::vector<std::vector<size_t>> buckets_of(flat.slots.size());
  for (size_t k = 0; k < flat.slots.size(); ++k) {
    const ParamSlot& s = flat.slots[k];
    for (size_t i = 0; i < buckets_.size(); ++i)
      if (buckets_[i].begin < s.offset + s.numel && s.offset < buckets_[i].end) {
        buckets_of[k].push_back(i);
        buckets_[i].params += 1;
      }
  }
  const Shard mine = flat.shard(rank);
  for (auto& b : buckets_) {
    b.counts.assign(flat.world_size, 0);
    for (int r = 0; r < flat.world_size; ++r) {
      const Shard sh = flat.shard(r);
      const int64_t lo = std::max(b.begin, sh.offset), hi = std::min(b.end, sh.offset + sh.size);
      b.counts[r] = std::max<int64_t>(0, hi - lo);
    }
    b.recv_offset = std::max(b.begin, mine.offset) - mine.offset;
  }
  if (opt.overlap) {
    auto named = module.named_parameters(/*recurse=*/true);
    for (size_t k = 0; k < flat.slots.size(); ++k) {
      auto acc = torch::autograd::impl::grad_accumulator(named[flat.slots[k].name]);
      for (size_t i : buckets_of[k]) acc->add_post_hook(std::make_unique<BucketHook>(this, i));
      accumulators_.push_back(std::move(acc));
    }
  }
}

GradBuckets::~GradBuckets() = default;

void GradBuckets::begin() {
  for (auto& b : buckets_) {
    b.pending = b.params;
    b.launched = false;
    b.request = -1;
  }
  next_launch_ = 0;
  launched_in_backward_ = 0;
  in_backward_ = true;
}

void GradBuckets::on_param_ready(size_t bucket) {
  if (!in_backward_) return;  // e.g. a backward outside the training step
  Bucket& b = buckets_[bucket];
  if (--b.pending == 0) launch_ready_in_order();
  comm_.progress();
}

void GradBuckets::launch(Bucket& b) {
  b.request = comm_.start_reduce_scatter(flat_.grads.data_ptr<float>() + b.begin,
                                         grad_shard_ + b.recv_offset, b.counts, opt_.wire);
  b.launched = true;
}

void GradBuckets::launch_ready_in_order() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(buckets_[next_launch_++]);
    ++launched_in_backward_;
  }
}

void GradBuckets::finish() {
  in_backward_ = false;
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (auto& b : buckets_) comm_.wait(b.request);
}

}  // namespace vitkd
