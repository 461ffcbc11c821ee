// The one-rank backend: no MPI call and no NCCL communicator.
#include <memory>

#include "comm/backend.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

/// One rank: nothing to reduce and nobody to talk to. The reduce-scatter of
/// a bucket is this rank's own values (rounded through bfloat16 on a bf16
/// wire, as a reduction of one bf16 value is), the all-gather leaves the
/// buffer as it is, and the device all-reduces are done before they start.
/// No MPI call and no NCCL communicator, on any device: a single-GPU run
/// never bootstraps NCCL. On the CPU the result is bit for bit what the MPI
/// backend gives at one rank (the same conversion, a scale by 1).
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(const CommPlacement& where) : where_(where) {}
  std::string name() const override { return choice_name(Backend::Local); }

  int start_reduce_scatter(const float* send, float* recv, const std::vector<int64_t>& counts,
                           WireType wire) override {
    if (counts.size() != 1)
      die(kExitRuntime, "internal error: the local backend reduces for one rank, got " +
                            std::to_string(counts.size()) + " counts");
    const int64_t n = counts[0];
    if (n > 0) {
      torch::Tensor out = on_device(recv, n);
      const torch::Tensor in = on_device(const_cast<float*>(send), n);
      if (wire == WireType::BF16)
        out.copy_(in.to(torch::kBFloat16));  // LibTorch's rounding, as util/bf16.hpp
      else if (recv != send)
        out.copy_(in);
    }
    return next_id_++;
  }
  void wait(int) override {}
  void all_gather(float*, int64_t) override {}
  void all_gather_bf16(uint16_t*, int64_t) override {}
  void all_gather_v(float*, const std::vector<int64_t>&) override {}
  bool allreduce_mean_on_device(float*, int64_t) override { return true; }
  bool allreduce_sum_on_device(double*, int64_t) override { return true; }

 private:
  torch::Tensor on_device(float* p, int64_t n) const {
    return torch::from_blob(p, {n}, torch::TensorOptions().dtype(torch::kFloat32).device(where_.device));
  }
  CommPlacement where_;
  int next_id_ = 0;
};

}  // namespace

void register_local_backend() {
  BackendTraits t;
  t.id = Backend::Local;
  t.make = [](const CommPlacement& where) -> std::unique_ptr<Communicator> {
    return std::make_unique<LocalCommunicator>(where);
  };
  register_backend(t);
}

}  // namespace vitkd
