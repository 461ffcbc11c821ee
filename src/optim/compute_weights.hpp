#pragma once
// The compute-precision copies of a model's matrix-product operands.
//
// In a bf16 run the optimizer keeps a bf16 copy of every parameter that a
// matrix product reads (the Linear weights and biases), made once per step
// where ZeRO-1 gathers the parameters (optim/compute_copy.hpp). The forward
// pass reads the copies, so autocast finds its operands already in bf16 and
// casts no weight. The gradient reaches the fp32 parameter as it does through
// autocast's cast: the bf16 gradient widened to fp32. Values and gradients
// are therefore bitwise those of autocast casting the fp32 parameters.
#include <torch/torch.h>

#include <unordered_map>

namespace vitkd {

class ComputeWeights {
 public:
  /// `copy` (the parameter's shape, the compute dtype) stands for `param` in
  /// forward passes from now on. Its values are the caller's to keep current.
  void set(const torch::Tensor& param, const torch::Tensor& copy);
  /// What a matrix product reads for `param`: its copy, differentiable back
  /// to `param` (gradient widened to param's dtype) where grad mode is on;
  /// `param` itself when it has no copy.
  torch::Tensor operator()(const torch::Tensor& param) const;
  size_t size() const { return copies_.size(); }

 private:
  std::unordered_map<const c10::TensorImpl*, torch::Tensor> copies_;
};

/// `param` through `cw` when there is one (the modules' operand reads).
inline torch::Tensor operand(const ComputeWeights* cw, const torch::Tensor& param) {
  return cw ? (*cw)(param) : param;
}

}  // namespace vitkd
