#include "optim/flat_params.hpp"

#include <stdexcept>

namespace vitkd {

bool decays(const std::string& name, int64_t ndim, DecayScope scope) {
  if (scope == DecayScope::All) return true;
  auto ends_with = [&](const char* s) {
    const std::string suf(s);
    return name.size() >= suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ndim < 2) return false;  // biases and norm weights
  return !(ends_with("cls_token") || ends_with("dist_token") || ends_with("pos_embed"));
}

FlatParams::FlatParams(torch::nn::Module& module, int world, int64_t align) : world_size(world) {
  torch::NoGradGuard ng;
  const auto* scoped = dynamic_cast<const DecayScoped*>(&module);
  const DecayScope scope = scoped ? scoped->decay_scope() : DecayScope::Matrices;
  auto named = module.named_parameters(/*recurse=*/true);
  for (const auto& p : named) {
    ParamSlot s;
    s.name = p.key();
    s.offset = numel;
    s.numel = p.value().numel();
    s.shape = p.value().sizes().vec();
    s.decay = decays(s.name, p.value().dim(), scope);
    numel += s.numel;
    slots.push_back(s);
  }
  const int64_t unit = static_cast<int64_t>(world) * align;
  padded = (numel + unit - 1) / unit * unit;
  if (padded == 0) padded = unit;
  // On the module's device (the CPU for a module without parameters).
  const torch::Device dev = named.is_empty() ? torch::Device(torch::kCPU) : named[0].value().device();
  const auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  params = torch::zeros({padded}, opt);
  grads = torch::zeros({padded}, opt);
  decay_mask = torch::zeros({padded}, opt);
  size_t i = 0;
  for (auto& p : named) {
    const auto& s = slots[i++];
    auto view = params.narrow(0, s.offset, s.numel).view(s.shape);
    view.copy_(p.value().to(torch::kFloat32));
    p.value().set_data(view);
    p.value().mutable_grad() = grads.narrow(0, s.offset, s.numel).view(s.shape);
    if (s.decay) decay_mask.narrow(0, s.offset, s.numel).fill_(1.0f);
  }
}

}  // namespace vitkd
