#pragma once
// Vision Transformer (ViT / DeiT) in the LibTorch C++ frontend.
//
// Submodules are registered under their member names; the dotted names
// ("blocks.0.attn.qkv.weight", ...) are the checkpoint keys:
//   patch_embed.proj.{weight [D, C*p*p], bias [D]}   patches flattened (c, py, px)
//   cls_token [1,1,D], dist_token [1,1,D] (optional), pos_embed [1, T, D]
//   blocks.<i>.norm1, .attn.qkv [3D, D], .attn.proj [D, D], .norm2,
//   blocks.<i>.mlp.fc1 [M, D], .mlp.fc2 [D, M]       (M = round(D * mlp_ratio))
//   norm, head [K, D], head_dist [K, D] (optional)
// Token order is [cls, dist, patches] (DeiT); T = 1 (+1) + (S/p)^2.
#include <torch/torch.h>

#include "optim/compute_weights.hpp"
#include "model/drop_path.hpp"
#include "optim/flat_params.hpp"

#include <cstdint>
#include <string>

namespace vitkd {

// The fields of ModelSpec, written once: X(C++ type, name, default, meaning).
// The configuration keys model.<name> (train/setup.cpp), the checkpoint and
// export attributes model_<name> (io/checkpoint.cpp) and the export's
// model.json (cmd/export.cpp) are generated from this list.
#define VITKD_MODEL_SPEC_FIELDS(X)                                        \
  X(int64_t, image_size, 28, "input H = W in pixels")                     \
  X(int64_t, channels, 1, "input channels C")                             \
  X(int64_t, patch, 4, "patch side p in pixels; divides image_size")      \
  X(int64_t, dim, 192, "embedding width D")                               \
  X(int64_t, depth, 6, "transformer blocks")                              \
  X(int64_t, heads, 3, "attention heads; divide D")                       \
  X(double, mlp_ratio, 4.0, "MLP hidden width M = round(D * mlp_ratio)")  \
  X(int64_t, classes, 10, "classes K")                                    \
  X(bool, dist_token, false, "DeiT distillation token and head")           \
  X(double, norm_eps, 1e-6, "LayerNorm epsilon (PyTorch's default: 1e-5)")  \
  X(InitScheme, init, InitScheme::TruncNormal, "initialisation (model.init)") \
  X(DecayScope, decay, DecayScope::Matrices, "AdamW weight decay on (model.decay)")

/// Architecture of one ViT. Sizes in pixels / features (VITKD_MODEL_SPEC_FIELDS).
/// Besides the shape it records how the weights start (init) and which of them
/// take weight decay (decay; the model says it, as timm's no_weight_decay()
/// does, and FlatParams asks it through DecayScoped).
struct ModelSpec {
#define VITKD_SPEC_MEMBER(type, name, def, meaning) type name = def;
  VITKD_MODEL_SPEC_FIELDS(VITKD_SPEC_MEMBER)
#undef VITKD_SPEC_MEMBER

  int64_t num_patches() const { return (image_size / patch) * (image_size / patch); }
  int64_t tokens() const { return num_patches() + 1 + (dist_token ? 1 : 0); }
  /// Tokens the heads read: the class token (and the distillation token).
  int64_t head_tokens() const { return dist_token ? 2 : 1; }
  int64_t mlp_hidden() const {
    // -1 when not representable (a corrupt checkpoint's NaN or huge ratio):
    // converting such a double to an integer is undefined behaviour.
    const double m = dim * mlp_ratio + 0.5;
    return m >= 0 && m < 9.0e18 ? static_cast<int64_t>(m) : -1;
  }
  /// Every size within limits for which the counts below cannot overflow
  /// (far beyond any real model). Specs read from files may not be.
  bool countable() const;
  /// Parameter count (exact; equals the sum over named_parameters()).
  int64_t parameter_count() const;
  /// Forward multiply-add FLOPs per sample (2 per MAC, matmuls only) as
  /// ViT::forward computes them: the last block on the head tokens only.
  double forward_flops() const;
  /// One line; safe for any field values (the counts only when countable()).
  std::string describe() const;
};

/// Logits of one forward pass.
struct ViTOutput {
  torch::Tensor logits;       ///< [B, K] class-token head
  torch::Tensor dist_logits;  ///< [B, K] distillation head; undefined without dist_token
  /// The prediction: the class head, or the mean of both heads (DeiT inference).
  torch::Tensor prediction() const;
};

/// How attention computes softmax(q k^T * scale) v: LibTorch's fused kernel
/// (at::scaled_dot_product_attention, LibTorch 2.1 and newer: a flash-attention
/// kernel on the CPU, flash or memory-efficient kernels on GPUs), vitkd's own
/// bmm-softmax-bmm, which every LibTorch runs, or Auto: per call, fused where
/// this LibTorch has it and the call is on a GPU or not in bf16; unfused
/// otherwise. (Measured on an AVX512_BF16/AMX Xeon with LibTorch 2.15, ViT-S/16
/// shapes, forward + backward: the fused kernel took 1.6-1.7x the time of the
/// unfused one in bf16 and the same in fp32; experiments/performance-log.md.)
/// (AttentionKernel, model.attention, is in config/choices.hpp.)
/// model.attention for this LibTorch: Fused on a LibTorch without the kernel
/// is a UserError naming `origin` (the configuration) and the fix.
AttentionKernel attention_kernel(AttentionKernel setting, const std::string& origin);
/// The kernel `k` runs for inputs on a GPU (`cuda`) or the CPU, in bf16
/// (autocast or bf16 weights) or not: Fused or Unfused.
AttentionKernel attention_runs(AttentionKernel k, bool cuda, bool bf16);
/// "fused (at::scaled_dot_product_attention)" or "unfused (bmm-softmax-bmm)".
std::string describe(AttentionKernel k);

struct PatchEmbedImpl : torch::nn::Module {
  PatchEmbedImpl(int64_t channels, int64_t patch, int64_t dim);
  torch::Tensor forward(const torch::Tensor& x);  ///< [B,C,H,W] -> [B,N,D]
  int64_t patch;
  torch::nn::Linear proj{nullptr};
  const ComputeWeights* compute = nullptr;  ///< the operands' compute copies (ViTImpl::use_compute_weights)
};
TORCH_MODULE(PatchEmbed);

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t dim, int64_t heads);
  /// [B,T,D] -> [B,T,D]; with queries = Q > 0, only the first Q tokens attend
  /// (to all T) and the result is [B,Q,D].
  torch::Tensor forward(const torch::Tensor& x, int64_t queries = 0);
  /// For a frozen model: multiplies the query rows of qkv (weight and bias) by
  /// `scale`, so that forward skips its q * scale. Bitwise the same logits
  /// when scale is a power of two (head size 4, 16, 64, 256, ...), otherwise
  /// equal up to rounding. Never call it on a model that is trained or saved.
  void fold_scale_into_queries();
  /// proj(x), reading the operands through `compute`.
  torch::Tensor out_proj(const torch::Tensor& x);
  int64_t heads;
  double scale;
  bool scale_folded = false;  ///< set by fold_scale_into_queries()
  AttentionKernel kernel = AttentionKernel::Auto;
  torch::nn::Linear qkv{nullptr}, proj{nullptr};
  const ComputeWeights* compute = nullptr;
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t dim, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  const ComputeWeights* compute = nullptr;
};
TORCH_MODULE(Mlp);

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t dim, int64_t heads, int64_t hidden, double norm_eps = 1e-6);
  /// Pre-norm residual block, [B,T,D] -> [B,T,D], or [B,Q,D] for the first
  /// queries = Q > 0 tokens only (see AttentionImpl::forward). `attn_scale`
  /// and `mlp_scale` [B,1,1], where defined, multiply the attention and MLP
  /// branches per sample before each residual add (stochastic depth).
  torch::Tensor forward(const torch::Tensor& x, int64_t queries = 0, const torch::Tensor& attn_scale = {},
                        const torch::Tensor& mlp_scale = {});
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

struct ViTImpl : torch::nn::Module, DecayScoped {
  explicit ViTImpl(const ModelSpec& spec);
  /// images [B,C,H,W] float. The last block runs only the head tokens' rows;
  /// all_tokens = true runs it on every token (the same logits, more work; the
  /// reference the tests compare the short path with). `drop`, in a training
  /// forward of a model with stochastic depth only: the per-sample branch
  /// scales of every block (drop_path_scales()); null or empty: none.
  ViTOutput forward(const torch::Tensor& images, bool all_tokens = false, const DropPathScales* drop = nullptr);
  /// Every block's attention computes with `k` (model.attention).
  void set_attention(AttentionKernel k);
  /// The parameters the forward pass reads as matrix-product operands, the
  /// ones autocast casts, and so the ones with compute copies: every Linear's
  /// weight and the heads' biases. The other biases are added to [B, T, D]
  /// products in fp32 arithmetic (as torch::nn::Linear adds them, and fc1's
  /// in bias_gelu), so they are read in fp32.
  std::vector<torch::Tensor> matrix_operands();
  /// From now on the forward pass reads those operands through `cw` (null:
  /// the parameters themselves); `cw` must outlive the model's use of it.
  void use_compute_weights(const ComputeWeights* cw);
  /// spec.init = TruncNormal: normal(0, 0.02) clipped to +-2 sigma for every
  /// weight, the tokens and the position embedding; zero biases; unit norms.
  /// spec.init = Torch: what a plain PyTorch ViT gets from its modules'
  /// defaults (nn.Linear, a Conv2d patch embedding, nn.MultiheadAttention):
  /// Linear weights kaiming_uniform(a = sqrt(5)), i.e. U(+-1/sqrt(fan_in)), and
  /// biases U(+-1/sqrt(fan_in)) (patch projection: fan_in = C*p*p, as Conv2d);
  /// attention's qkv weight xavier_uniform with zero qkv and proj biases
  /// (nn.MultiheadAttention's in_proj and out_proj); position embedding
  /// normal(0, 0.02); class and distillation tokens zero; unit norms.
  /// Deterministic given torch's global generator.
  void reset_parameters();
  DecayScope decay_scope() const override;

  ModelSpec spec;
  PatchEmbed patch_embed{nullptr};
  torch::Tensor cls_token, dist_token, pos_embed;
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr}, head_dist{nullptr};
  const ComputeWeights* compute = nullptr;
};
TORCH_MODULE(ViT);

/// Prepares a frozen model (a teacher) or part of one for inference: eval
/// mode, no gradients, each attention's scale folded into its query weights
/// (bitwise the same logits for power-of-two scales, e.g. head size 64), and
/// with `bf16` every Linear's weight and bias cast to bf16 once, instead of
/// autocast casting them again in every forward pass (the values autocast
/// would produce; norms, tokens and the position embedding stay fp32, as
/// autocast keeps them).
void freeze_for_inference(torch::nn::Module& m, bool bf16);

}  // namespace vitkd
