#include "comm/comm.hpp"

#include "comm/world.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

/// `t`'s values in contiguous host memory: `t` itself on the CPU, else a copy.
torch::Tensor host_view(const torch::Tensor& t) {
  if (t.dtype() != torch::kFloat32 || !t.is_contiguous())
    die(kExitRuntime, "internal error: tensor collectives take contiguous float32 tensors");
  return t.device().is_cpu() ? t : t.to(torch::kCPU);
}

}  // namespace

void allreduce_sum_inplace(const torch::Tensor& t) {
  torch::Tensor h = host_view(t);
  allreduce_sum_inplace(h.data_ptr<float>(), h.numel());
  if (!t.device().is_cpu()) t.copy_(h);
}

void broadcast_tensor(const torch::Tensor& t, int root) {
  torch::Tensor h = host_view(t);
  broadcast_bytes(h.data_ptr<float>(), h.numel() * static_cast<int64_t>(sizeof(float)), root);
  if (!t.device().is_cpu()) t.copy_(h);
}

}  // namespace vitkd
