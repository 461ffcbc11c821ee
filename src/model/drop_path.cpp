#include "model/drop_path.hpp"

#include "util/hash.hpp"

#include <torch/torch.h>

namespace vitkd {

double drop_path_block_rate(double rate, int64_t block, int64_t depth) {
  if (depth < 2 || rate <= 0) return 0.0;
  return rate * static_cast<double>(block) / static_cast<double>(depth - 1);
}

bool drop_path_keeps(uint64_t seed, int64_t epoch, int64_t index, int64_t block, DropBranch branch, double keep) {
  if (keep >= 1) return true;
  // The per-(seed, epoch) key, then the sample, block and branch, as the
  // augmentation keys its views (data/augment.cpp) under a tag of its own.
  const uint64_t key = hash64(seed, 0x44524F50ULL /* "DROP" */, static_cast<uint64_t>(epoch));
  const uint64_t r = hash64(key, static_cast<uint64_t>(index), static_cast<uint64_t>(block),
                            static_cast<uint64_t>(branch));
  return to_unit(r) < keep;
}

DropPathScales drop_path_scales(const DropPathSpec& spec, int64_t depth, int64_t epoch, const torch::Tensor& indices,
                                const torch::Device& device) {
  DropPathScales s;
  if (!spec.enabled()) return s;
  const auto idx = indices.to(torch::kLong).contiguous();
  const int64_t n = idx.numel();
  const int64_t* ip = idx.data_ptr<int64_t>();
  s.attn.resize(depth);
  s.mlp.resize(depth);
  for (int64_t b = 0; b < depth; ++b) {
    const double keep = 1.0 - drop_path_block_rate(spec.rate, b, depth);
    if (keep >= 1) continue;
    // timm: bernoulli_(keep_prob), then div_(keep_prob) in the tensor's float type.
    const float kept = 1.0f / static_cast<float>(keep);
    for (auto [branch, out] : {std::pair{DropBranch::Attention, &s.attn[b]}, std::pair{DropBranch::Mlp, &s.mlp[b]}}) {
      auto t = torch::empty({n, 1, 1}, torch::kFloat32);
      float* tp = t.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) tp[i] = drop_path_keeps(spec.seed, epoch, ip[i], b, branch, keep) ? kept : 0.0f;
      *out = t.to(device);
    }
  }
  return s;
}

}  // namespace vitkd
