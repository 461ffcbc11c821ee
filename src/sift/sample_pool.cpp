#include "sift/sample_pool.hpp"

namespace vitkd {

void SamplePool::add(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& t,
                     const torch::Tensor& i) {
  if (x.size(0) == 0) return;
  xs_.push_back(x);
  ys_.push_back(y);
  ts_.push_back(t);
  is_.push_back(i);
  size_ += x.size(0);
}

std::vector<int64_t> SamplePool::indices() const {
  std::vector<int64_t> out;
  for (auto& i : is_) out.insert(out.end(), i.data_ptr<int64_t>(), i.data_ptr<int64_t>() + i.numel());
  return out;
}

std::vector<float> SamplePool::logits() const {
  std::vector<float> out;
  for (auto& t : ts_)
    if (t.defined()) {
      auto c = t.to(torch::kCPU).contiguous();
      out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
  return out;
}

PoolTake SamplePool::take(int64_t n) {
  PoolTake out;
  if (n == 0) return out;
  auto cat = [](std::vector<torch::Tensor>& v) { return v.size() == 1 ? v[0] : torch::cat(v, 0); };
  auto x = cat(xs_), y = cat(ys_), i = cat(is_);
  const bool has_t = ts_.front().defined();
  torch::Tensor t = has_t ? cat(ts_) : torch::Tensor();
  out.x = x.narrow(0, 0, n);
  out.y = y.narrow(0, 0, n);
  out.i = i.narrow(0, 0, n);
  if (has_t) out.t = t.narrow(0, 0, n);
  xs_.clear();
  ys_.clear();
  ts_.clear();
  is_.clear();
  const int64_t rest = size_ - n;
  size_ = 0;
  if (rest > 0)
    add(x.narrow(0, n, rest), y.narrow(0, n, rest), has_t ? t.narrow(0, n, rest) : torch::Tensor(),
        i.narrow(0, n, rest));
  return out;
}

}  // namespace vitkd
