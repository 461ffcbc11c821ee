#include "optim/compute_copy.hpp"

#include <algorithm>
#include <stdexcept>

#include "util/bf16.hpp"

namespace vitkd {

ComputeCopy::ComputeCopy(FlatParams& flat, const std::vector<torch::Tensor>& operands) : flat_(flat) {
  torch::NoGradGuard ng;
  const auto dev = flat.params.device();
  compute_ = torch::empty({flat.padded}, flat.params.options().dtype(torch::kBFloat16));
  // Which flat elements are operands (read from the copy) and which stay fp32.
  std::vector<uint8_t> is_operand(static_cast<size_t>(flat.padded), 0);
  const float* base = flat.params.data_ptr<float>();
  for (const auto& p : operands) {
    const int64_t offset = p.data_ptr<float>() - base;
    if (p.scalar_type() != torch::kFloat32 || offset < 0 || offset + p.numel() > flat.numel || !p.is_contiguous())
      throw std::logic_error("ComputeCopy: an operand outside the flat parameter buffer");
    std::fill_n(is_operand.begin() + offset, p.numel(), 1);
    weights_.set(p, compute_.narrow(0, offset, p.numel()).view(p.sizes()));
  }
  // The real elements that are not operands, in flat order, counted per shard.
  std::vector<int64_t> kept;
  for (int r = 0; r < flat.world_size; ++r) {
    const Shard sh = flat.shard(r);
    side_at_.push_back(static_cast<int64_t>(kept.size()));
    for (int64_t i = sh.offset; i < std::min(sh.offset + sh.size, flat.numel); ++i)
      if (!is_operand[static_cast<size_t>(i)]) kept.push_back(i);
    side_counts_.push_back(static_cast<int64_t>(kept.size()) - side_at_.back());
  }
  side_index_ = torch::tensor(kept, torch::TensorOptions().dtype(torch::kInt64)).to(dev);
  side_ = torch::zeros({static_cast<int64_t>(kept.size())}, flat.params.options());
  refresh();
}

void ComputeCopy::refresh() {
  torch::NoGradGuard ng;
  compute_.copy_(flat_.params);
}

void ComputeCopy::gather(Communicator& comm, const Shard& shard, int rank) {
  torch::NoGradGuard ng;
  compute_.narrow(0, shard.offset, shard.size).copy_(flat_.params.narrow(0, shard.offset, shard.size));
  comm.all_gather_bf16(bf16_bits(compute_), shard.size);
  if (side_.numel() == 0) return;
  const int64_t at = side_at_[static_cast<size_t>(rank)], n = side_counts_[static_cast<size_t>(rank)];
  side_.narrow(0, at, n).copy_(flat_.params.index_select(0, side_index_.narrow(0, at, n)));
  comm.all_gather_v(side_.data_ptr<float>(), side_counts_);
  flat_.params.index_copy_(0, side_index_, side_);
}

double ComputeCopy::gather_bytes() const {
  return double(flat_.shard(0).size) * 2 + double(side_.numel()) * sizeof(float) / flat_.world_size;
}

int64_t ComputeCopy::bytes() const {
  return compute_.numel() * 2 + side_.numel() * static_cast<int64_t>(sizeof(float)) +
         side_index_.numel() * static_cast<int64_t>(sizeof(int64_t));
}

}  // namespace vitkd
