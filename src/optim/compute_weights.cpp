#include "optim/compute_weights.hpp"

namespace vitkd {
namespace {

// Forward: the copy, as it is. Backward: the copy's gradient in the
// parameter's dtype, which is what autocast's cast (aten::_to_copy) returns.
struct Precast : public torch::autograd::Function<Precast> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& param,
                               const torch::Tensor& copy) {
    ctx->saved_data["dtype"] = static_cast<int64_t>(param.scalar_type());
    return copy;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad[0].to(dtype), torch::Tensor()};
  }
};

}  // namespace

void ComputeWeights::set(const torch::Tensor& param, const torch::Tensor& copy) {
  TORCH_CHECK(copy.sizes().equals(param.sizes()), "ComputeWeights: a copy of another shape than its parameter");
  copies_[param.unsafeGetTensorImpl()] = copy;
}

torch::Tensor ComputeWeights::operator()(const torch::Tensor& param) const {
  const auto it = copies_.find(param.unsafeGetTensorImpl());
  if (it == copies_.end()) return param;
  if (!torch::GradMode::is_enabled() || !param.requires_grad()) return it->second;
  return Precast::apply(param, it->second);
}

}  // namespace vitkd
