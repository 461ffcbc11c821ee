#pragma once
// Loss-history sifting (Selective Backprop, Jiang et al. 2019; the rule of
// SageMaker smart sifting):
//   1. push the global batch's per-sample losses into the history (the last
//      `history` losses, a ring buffer);
//   2. pct_i = #{h in history : h < L_i} / |history|;
//   3. keep sample i when u_i < pct_i^beta, with u_i uniform in [0, 1) from a
//      counter-based generator keyed on (seed, epoch, global sample index).
// The expected kept fraction of stationary losses is 1 / (1 + beta).
// Every rank holds the same history: the trainer gathers all ranks' losses
// and passes them here sorted by sample index, so the history, and with it
// the selection, does not depend on the rank count.
#include <cstdint>
#include <vector>

namespace vitkd {

class LossHistory {
 public:
  explicit LossHistory(int64_t capacity);
  void push(double loss);
  /// Fraction of stored losses strictly below `loss` (0 when empty).
  double percentile(double loss) const;
  int64_t size() const { return static_cast<int64_t>(values_.size()); }
  int64_t capacity() const { return capacity_; }
  /// Oldest first (for checkpoints).
  std::vector<double> ordered() const;

 private:
  int64_t capacity_;
  int64_t next_ = 0;  ///< ring position of the next write once full
  std::vector<double> values_;
};

class Sifter {
 public:
  Sifter(double beta, int64_t history, uint64_t seed);
  /// The uniform u for a sample (exposed for tests).
  double uniform(int64_t epoch, int64_t index) const;
  /// Pushes `losses` (one global batch, ordered by `indices` ascending), then
  /// returns keep flags in the same order.
  std::vector<uint8_t> select(const std::vector<int64_t>& indices,
                              const std::vector<double>& losses, int64_t epoch);
  const LossHistory& history() const { return history_; }
  /// Refills the history from a checkpoint (`oldest_first`, as ordered()).
  void restore_history(const std::vector<double>& oldest_first) {
    history_ = LossHistory(history_.capacity());
    for (double l : oldest_first) history_.push(l);
  }
  double beta() const { return beta_; }

 private:
  double beta_;
  uint64_t seed_;
  LossHistory history_;
};

}  // namespace vitkd
