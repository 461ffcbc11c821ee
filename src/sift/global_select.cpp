#include "sift/global_select.hpp"

#include <algorithm>
#include <utility>

#include "comm/world.hpp"
#include "util/error.hpp"

namespace vitkd {

GlobalSelector::GlobalSelector(double beta, int64_t history, int64_t global_batch, uint64_t seed,
                               const std::string& trace_path)
    : sifter_(beta, history + global_batch, seed), trace_path_(world().root() ? trace_path : "") {}

GlobalSelector::Decision GlobalSelector::select(const std::vector<int64_t>& indices,
                                                const torch::Tensor& losses, int64_t epoch) {
  const int64_t n = static_cast<int64_t>(indices.size());
  std::vector<double> mine(2 * n);
  if (n > 0) {
    const auto pd = losses.detach().to(torch::kCPU, torch::kFloat64).contiguous();  // one small copy
    for (int64_t i = 0; i < n; ++i) {
      mine[2 * i] = static_cast<double>(indices[i]);
      mine[2 * i + 1] = pd.data_ptr<double>()[i];
    }
  }
  // Every rank pushes the same losses in the same order (by sample index).
  const std::vector<double> all = allgatherv(mine);
  std::vector<std::pair<int64_t, double>> pairs;
  for (size_t i = 0; i + 1 < all.size(); i += 2) pairs.emplace_back(int64_t(all[i]), all[i + 1]);
  std::sort(pairs.begin(), pairs.end());
  std::vector<int64_t> idx;
  std::vector<double> ls;
  for (auto& p : pairs) {
    idx.push_back(p.first);
    ls.push_back(p.second);
  }
  const auto keep = sifter_.select(idx, ls, epoch);
  if (!trace_path_.empty() && !trace_) {
    trace_.reset(std::fopen(trace_path_.c_str(), "w"));
    VK_CHECK(FILE, trace_ != nullptr);
  }
  if (trace_)
    for (size_t i = 0; i < idx.size(); ++i)
      std::fprintf(trace_.get(), "%lld %lld %.9g %d\n", (long long)epoch, (long long)idx[i], ls[i],
                   int(keep[i]));
  Decision d;
  for (auto k : keep) d.kept_global += k;
  for (int64_t i = 0; i < n; ++i) {
    auto it = std::lower_bound(idx.begin(), idx.end(), indices[i]);
    if (keep[it - idx.begin()]) d.rows.push_back(i);
  }
  return d;
}

}  // namespace vitkd
