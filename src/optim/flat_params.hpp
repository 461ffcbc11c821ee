#pragma once
// One contiguous fp32 buffer for all parameters and one for all gradients.
// Every parameter tensor and its .grad are views into them, so collectives
// work on the buffers directly, without copies.
//
// Layout: parameters in registration order (named_parameters()), each at
// `offset` (elements), then zero padding up to `padded`, a multiple of
// world_size * align. Rank r owns the shard {r*S, S} with S = padded / world.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace vitkd {

/// A contiguous range of the flat buffer, in elements.
struct Shard {
  int64_t offset = 0;
  int64_t size = 0;
};

/// Where one parameter lives in the flat buffer.
struct ParamSlot {
  std::string name;            ///< checkpoint key, e.g. "blocks.0.attn.qkv.weight"
  int64_t offset = 0;          ///< first element in the flat buffer
  int64_t numel = 0;           ///< elements
  std::vector<int64_t> shape;  ///< tensor shape
  bool decay = false;          ///< AdamW weight decay applies
};

// Which parameters take AdamW weight decay (model.decay, DecayScope in
// config/choices.hpp): Matrices, >= 2-D weights except the tokens and the
// position embedding; All, every parameter (torch.optim.AdamW with one
// parameter group).


/// A module that says which of its parameters take weight decay (ViT does,
/// from model.decay). FlatParams asks a module that is one; any other module
/// gets DecayScope::Matrices.
struct DecayScoped {
  virtual ~DecayScoped() = default;
  virtual DecayScope decay_scope() const = 0;
};

class FlatParams {
 public:
  /// Moves `module`'s parameters into the flat buffer (values preserved),
  /// allocated on the device the module's parameters are on.
  FlatParams(torch::nn::Module& module, int world_size, int64_t align = 16);

  torch::Tensor params;      ///< fp32 [padded], on the module's device
  torch::Tensor grads;       ///< fp32 [padded]; the parameters' .grad are views
  torch::Tensor decay_mask;  ///< fp32 [padded]; 1 where weight decay applies, 0 elsewhere
  std::vector<ParamSlot> slots;
  int64_t numel = 0;         ///< real parameters (without padding)
  int64_t padded = 0;        ///< buffer length
  int world_size = 1;

  Shard shard(int rank) const { return {rank * (padded / world_size), padded / world_size}; }
  void zero_grad() { grads.zero_(); }
};

/// Whether parameter `name` with `ndim` dimensions takes weight decay. Matrices:
/// not biases, norms, the class and distillation tokens or the position
/// embedding. All: every parameter. Padding never does.
bool decays(const std::string& name, int64_t ndim, DecayScope scope = DecayScope::Matrices);

}  // namespace vitkd
