#include "sift/sifter.hpp"

#include <cmath>

#include "util/hash.hpp"

namespace vitkd {

LossHistory::LossHistory(int64_t capacity) : capacity_(capacity) { values_.reserve(capacity); }

void LossHistory::push(double loss) {
  if (static_cast<int64_t>(values_.size()) < capacity_) {
    values_.push_back(loss);
  } else {
    values_[next_] = loss;
    next_ = (next_ + 1) % capacity_;
  }
}

double LossHistory::percentile(double loss) const {
  if (values_.empty()) return 0.0;
  int64_t below = 0;
  for (double h : values_) below += h < loss;
  return static_cast<double>(below) / static_cast<double>(values_.size());
}

std::vector<double> LossHistory::ordered() const {
  std::vector<double> out;
  out.reserve(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) out.push_back(values_[(next_ + i) % values_.size()]);
  return out;
}

Sifter::Sifter(double beta, int64_t history, uint64_t seed)
    : beta_(beta), seed_(seed), history_(history) {}

double Sifter::uniform(int64_t epoch, int64_t index) const {
  return to_unit(hash64(seed_, 0x53494654ULL /* "SIFT" */, static_cast<uint64_t>(epoch),
                        static_cast<uint64_t>(index)));
}

std::vector<uint8_t> Sifter::select(const std::vector<int64_t>& indices,
                                    const std::vector<double>& losses, int64_t epoch) {
  for (double l : losses) history_.push(l);
  std::vector<uint8_t> keep(losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    const double p = beta_ == 0.0 ? 1.0 : std::pow(history_.percentile(losses[i]), beta_);
    keep[i] = uniform(epoch, indices[i]) < p;
  }
  return keep;
}

}  // namespace vitkd
