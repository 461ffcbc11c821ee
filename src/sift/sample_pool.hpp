#pragma once
// The pool of samples that sifting (scope "sample") kept and no step has
// trained yet. Each rank pools its own kept samples; a step takes a fixed
// number from the front, so every step trains a full batch on every rank.
// With the kd criterion the pool also carries each sample's teacher logits,
// computed during selection, so the teacher does not run twice.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace vitkd {

/// Samples taken from the pool (n rows each; all undefined when n == 0).
struct PoolTake {
  torch::Tensor x;  ///< float32 [n, C, H, W] normalized (and augmented) inputs
  torch::Tensor y;  ///< int64 [n] labels
  torch::Tensor t;  ///< float32 [n, K] teacher logits, or undefined when none were pooled
  torch::Tensor i;  ///< int64 [n] sample indices in the train split
};

class SamplePool {
 public:
  int64_t size() const { return size_; }
  /// Appends n rows (n may be 0); `t` undefined when the rows carry no logits.
  void add(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& t,
           const torch::Tensor& i);
  /// Removes and returns the first n samples (n <= size()).
  PoolTake take(int64_t n);
  /// Pooled sample indices, in pool order (for checkpoints).
  std::vector<int64_t> indices() const;
  /// Pooled teacher logits [size(), K] row-major, or empty when none were computed.
  std::vector<float> logits() const;

 private:
  std::vector<torch::Tensor> xs_, ys_, ts_, is_;
  int64_t size_ = 0;
};

}  // namespace vitkd
