#include "model/vit.hpp"

#include "model/gelu.hpp"
#include "model/mixed_add.hpp"
#include "model/softmax.hpp"
#include "util/error.hpp"
#include "util/torch_compat.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace vitkd {

namespace {

// A Linear layer's product as torch::nn::Linear computes it
// (torch::nn::functional::linear): addmm for 2-D inputs; for [B, T, D] inputs
// a product and then the bias added in place. at::linear adds the bias inside
// the product for [B, T, D] inputs, which rounds differently. Under autocast
// the add keeps an fp32 bias in fp32 arithmetic, so the [B, T, D] layers'
// biases are read as the fp32 parameters, never from a bf16 copy
// (ViTImpl::matrix_operands). A bf16 product takes its fp32 bias through
// bias_add (model/mixed_add.hpp): the same values as the in-place add,
// without LibTorch's slower mixed-dtype path. A frozen bf16 teacher holds
// bf16 biases (freeze_for_inference): its products take the bias inside the
// product as at::linear does (and timm's teacher under autocast), one pass
// over the output fewer per layer; the fp32 path never has a bf16 bias.
torch::Tensor module_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (x.dim() == 2 || !b.defined()) return torch::nn::functional::linear(x, w, b);
  if (b.scalar_type() == torch::kBFloat16) return torch::linear(x, w, b);
  auto out = x.matmul(w.t());
  if (out.scalar_type() == torch::kBFloat16 && b.scalar_type() == torch::kFloat) return vitkd::bias_add(out, b);
  return out += b;
}

}  // namespace

int64_t ModelSpec::parameter_count() const {
  const int64_t D = dim, M = mlp_hidden(), K = classes, P = channels * patch * patch;
  int64_t n = P * D + D;                          // patch_embed
  n += D * (dist_token ? 2 : 1) + tokens() * D;   // tokens + pos_embed
  n += depth * (2 * D + (3 * D * D + 3 * D) + (D * D + D) + 2 * D + (M * D + M) + (D * M + D));
  n += 2 * D + K * D + K;                         // norm + head
  if (dist_token) n += K * D + K;
  return n;
}

double ModelSpec::forward_flops() const {
  const double D = dim, M = mlp_hidden(), T = tokens(), N = num_patches();
  const double P = channels * patch * patch, K = classes, Q = head_tokens();
  double f = 2 * N * P * D;                      // patch embedding
  f += (depth - 1) * (2 * T * D * 3 * D          // qkv
                      + 2 * 2 * T * T * D        // q k^T and attn v
                      + 2 * T * D * D            // proj
                      + 2 * 2 * T * D * M);      // fc1 + fc2
  // The last block runs its queries, proj and MLP on the Q head tokens only.
  f += 2 * T * D * 2 * D + 2 * Q * D * D         // k, v for all tokens; q
       + 2 * 2 * Q * T * D                       // q k^T and attn v
       + 2 * Q * D * D + 2 * 2 * Q * D * M;      // proj, fc1 + fc2
  f += 2 * D * K * (dist_token ? 2 : 1);         // heads
  return f;
}

bool ModelSpec::countable() const {
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  return in(image_size, 1, 1 << 16) && in(channels, 1, 1 << 10) && in(patch, 1, 1 << 10) &&
         in(dim, 1, 1 << 20) && in(depth, 1, 1 << 12) && in(classes, 1, 1 << 24) &&
         in(mlp_hidden(), 0, 1 << 24);
}

std::string ModelSpec::describe() const {
  std::ostringstream o;
  o << "ViT(image " << image_size << "x" << image_size << "x" << channels << ", patch " << patch
    << ", dim " << dim << ", depth " << depth << ", heads " << heads << ", mlp ";
  if (mlp_hidden() >= 0) o << mlp_hidden();
  else o << "ratio " << mlp_ratio;
  o << ", classes " << classes << (dist_token ? ", dist token" : "");
  // The training options, where they differ from the defaults.
  if (norm_eps != 1e-6) o << ", norm eps " << norm_eps;
  if (init != InitScheme::TruncNormal) o << ", init " << choice_name(init);
  if (decay != DecayScope::Matrices) o << ", decay " << choice_name(decay);
  if (countable()) o << "; " << parameter_count() << " parameters";
  o << ")";
  return o.str();
}

torch::Tensor ViTOutput::prediction() const {
  return dist_logits.defined() ? (logits + dist_logits) * 0.5 : logits;
}

AttentionKernel attention_kernel(AttentionKernel setting, const std::string& origin) {
  if (setting == AttentionKernel::Fused && !has_fused_attention())
    throw UserError(origin + ": " + setting_text("model.attention", AttentionKernel::Fused) +
                    " needs LibTorch 2.1 or newer (at::scaled_dot_product_attention), and this vitkd is built "
                    "against LibTorch " + std::string(TORCH_VERSION) + "; set " +
                    setting_text("model.attention", AttentionKernel::Auto) + " or \"" +
                    choice_name(AttentionKernel::Unfused) + "\", or build against a LibTorch 2.x (jobs/lanes/torch2.sh)");
  return setting;
}

AttentionKernel attention_runs(AttentionKernel k, bool cuda, bool bf16) {
  if (k != AttentionKernel::Auto) return k;
  // On the CPU in bf16 the fused kernel measured slower than bmm-softmax-bmm
  // (whose products oneDNN runs on AMX / AVX512_BF16); see vit.hpp.
  return has_fused_attention() && (cuda || !bf16) ? AttentionKernel::Fused : AttentionKernel::Unfused;
}

std::string describe(AttentionKernel k) {
  return k == AttentionKernel::Fused ? "fused (at::scaled_dot_product_attention)" : "unfused (bmm-softmax-bmm)";
}

PatchEmbedImpl::PatchEmbedImpl(int64_t channels, int64_t patch_, int64_t dim) : patch(patch_) {
  proj = register_module("proj", torch::nn::Linear(channels * patch * patch, dim));
}

torch::Tensor PatchEmbedImpl::forward(const torch::Tensor& x) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), p = patch;
  // [B,C,H/p,p,W/p,p] -> [B,H/p,W/p,C,p,p] -> [B,N,C*p*p]
  auto patches = x.reshape({B, C, H / p, p, W / p, p})
                     .permute({0, 2, 4, 1, 3, 5})
                     .reshape({B, (H / p) * (W / p), C * p * p});
  return module_linear(patches, operand(compute, proj->weight), proj->bias);
}

AttentionImpl::AttentionImpl(int64_t dim, int64_t heads_)
    : heads(heads_), scale(1.0 / std::sqrt(static_cast<double>(dim / heads_))) {
  qkv = register_module("qkv", torch::nn::Linear(dim, 3 * dim));
  proj = register_module("proj", torch::nn::Linear(dim, dim));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, int64_t queries) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), hd = D / heads;
  // q, k, v as contiguous [B*H, tokens, hd] blocks: one copy out of the
  // projection's [B, T, 3, H, hd] layout, after which both batched products
  // read their operands in place (k transposed by the GEMM, not copied).
  // unbind, not three selects: its backward stacks the three gradients into
  // one buffer, where each select's would fill a zero tensor of the whole
  // [3, B, H, T, hd] block and autograd would add the three (timm's order).
  torch::Tensor q, k, v;
  int64_t Q = T;
  if (queries > 0 && queries < T) {
    // Rows [0, D) of the qkv weight make the queries, rows [D, 3D) keys and values:
    // slices of the same parameter, so its gradient lands where the full path puts it.
    Q = queries;
    auto w = operand(compute, qkv->weight), b = qkv->bias;
    q = torch::linear(x.narrow(1, 0, Q), w.narrow(0, 0, D), b.narrow(0, 0, D))
            .reshape({B, Q, heads, hd}).transpose(1, 2).reshape({B * heads, Q, hd});
    auto kv = torch::linear(x, w.narrow(0, D, 2 * D), b.narrow(0, D, 2 * D))
                  .reshape({B, T, 2, heads, hd}).permute({2, 0, 3, 1, 4}).contiguous().unbind(0);
    k = kv[0].reshape({B * heads, T, hd});
    v = kv[1].reshape({B * heads, T, hd});
  } else {
    auto qkv_ = module_linear(x, operand(compute, qkv->weight), qkv->bias)
                    .reshape({B, T, 3, heads, hd})
                    .permute({2, 0, 3, 1, 4})
                    .contiguous()
                    .unbind(0);
    q = qkv_[0].reshape({B * heads, T, hd});
    k = qkv_[1].reshape({B * heads, T, hd});
    v = qkv_[2].reshape({B * heads, T, hd});
  }
  if (attention_runs(kernel, x.is_cuda(), q.scalar_type() == torch::kBFloat16) == AttentionKernel::Fused) {
    // LibTorch's fused kernel: flash attention on the CPU, flash or
    // memory-efficient attention on a GPU; no [Q, T] score matrix is kept.
    auto o = fused_attention(q.view({B, heads, Q, hd}), k.view({B, heads, T, hd}), v.view({B, heads, T, hd}),
                             scale_folded ? 1.0 : scale);
    return out_proj(o.transpose(1, 2).reshape({B, Q, D}));
  }
  // (scale q) k^T, the order of analysis/vitkd_model.py, so that the two agree
  // to the last bit in fp32.
  auto scores = torch::bmm(scale_folded ? q : q * scale, k.transpose(1, 2));  // [B*H,Q,T]
  auto out = torch::bmm(vitkd::softmax_lastdim(scores), v)                                  // [B*H,Q,hd]
                 .view({B, heads, Q, hd}).transpose(1, 2).reshape({B, Q, D});
  return out_proj(out);
}

torch::Tensor AttentionImpl::out_proj(const torch::Tensor& x) {
  return module_linear(x, operand(compute, proj->weight), proj->bias);
}

void AttentionImpl::fold_scale_into_queries() {
  if (scale_folded) return;
  torch::NoGradGuard ng;
  const int64_t D = proj->weight.size(0);
  qkv->weight.narrow(0, 0, D).mul_(scale);
  qkv->bias.narrow(0, 0, D).mul_(scale);
  scale_folded = true;
}

MlpImpl::MlpImpl(int64_t dim, int64_t hidden) {
  fc1 = register_module("fc1", torch::nn::Linear(dim, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, dim));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  // fc1's bias is added inside the GELU kernel (model/gelu.hpp, bias_gelu).
  return module_linear(vitkd::bias_gelu(torch::linear(x, operand(compute, fc1->weight)), fc1->bias),
                       operand(compute, fc2->weight), fc2->bias);
}

BlockImpl::BlockImpl(int64_t dim, int64_t heads, int64_t hidden, double norm_eps) {
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(norm_eps)));
  attn = register_module("attn", Attention(dim, heads));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(norm_eps)));
  mlp = register_module("mlp", Mlp(dim, hidden));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, int64_t queries, const torch::Tensor& attn_scale,
                                const torch::Tensor& mlp_scale) {
  // The residual adds: the fp32 stream plus a bf16 branch under autocast
  // (model/mixed_add.hpp), plain adds otherwise.
  auto a = attn(norm1(x), queries);
  if (attn_scale.defined()) a = a * attn_scale;  // stochastic depth (timm's DropPath)
  auto h = vitkd::residual_add(queries > 0 ? x.narrow(1, 0, queries) : x, a);
  auto m = mlp(norm2(h));
  if (mlp_scale.defined()) m = m * mlp_scale;
  return vitkd::residual_add(h, m);
}

ViTImpl::ViTImpl(const ModelSpec& s) : spec(s) {
  const int64_t D = s.dim;
  patch_embed = register_module("patch_embed", PatchEmbed(s.channels, s.patch, D));
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, D}));
  if (s.dist_token) dist_token = register_parameter("dist_token", torch::zeros({1, 1, D}));
  pos_embed = register_parameter("pos_embed", torch::zeros({1, s.tokens(), D}));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < s.depth; ++i) blocks->push_back(Block(D, s.heads, s.mlp_hidden(), s.norm_eps));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({D}).eps(s.norm_eps)));
  head = register_module("head", torch::nn::Linear(D, s.classes));
  if (s.dist_token) head_dist = register_module("head_dist", torch::nn::Linear(D, s.classes));
  reset_parameters();
}

void ViTImpl::reset_parameters() {
  torch::NoGradGuard ng;
  auto ends_with = [](const std::string& n, const char* suf) {
    const size_t k = std::strlen(suf);
    return n.size() >= k && n.compare(n.size() - k, k, suf) == 0;
  };
  if (spec.init == InitScheme::Torch) {
    for (auto& p : named_parameters()) {
      auto t = p.value();
      const std::string& n = p.key();
      if (n.find("norm") != std::string::npos) {
        if (ends_with(n, ".bias")) t.zero_();
        else t.fill_(1.0);
      } else if (ends_with(n, "cls_token") || ends_with(n, "dist_token")) {
        t.zero_();
      } else if (ends_with(n, "pos_embed")) {
        t.normal_(0.0, 0.02);
      } else if (ends_with(n, "attn.qkv.weight")) {
        // nn.MultiheadAttention's in_proj_weight: xavier_uniform over [3D, D].
        const double a = std::sqrt(6.0 / double(t.size(0) + t.size(1)));
        t.uniform_(-a, a);
      } else if (ends_with(n, "attn.qkv.bias") || ends_with(n, "attn.proj.bias")) {
        t.zero_();  // in_proj_bias and out_proj.bias
      } else {
        // nn.Linear (and Conv2d) defaults: kaiming_uniform(a = sqrt(5)) gives
        // U(+-1/sqrt(fan_in)) for the weight, and the bias U(+-1/sqrt(fan_in)).
        const bool bias = ends_with(n, ".bias");
        const std::string wname = bias ? n.substr(0, n.size() - 5) + ".weight" : n;
        const int64_t fan_in = bias ? named_parameters()[wname].size(1) : t.size(1);
        const double a = 1.0 / std::sqrt(double(fan_in));
        t.uniform_(-a, a);
      }
    }
    return;
  }
  auto trunc_normal = [](torch::Tensor& t) {
    t.normal_(0.0, 0.02).clamp_(-0.04, 0.04);
  };
  for (auto& p : named_parameters()) {
    auto t = p.value();
    const std::string& n = p.key();
    const bool is_norm = n.find("norm") != std::string::npos;
    if (ends_with(n, ".bias")) t.zero_();
    else if (is_norm) t.fill_(1.0);
    else trunc_normal(t);
  }
}

DecayScope ViTImpl::decay_scope() const { return spec.decay; }

void freeze_for_inference(torch::nn::Module& m, bool bf16) {
  m.eval();
  for (auto& p : m.parameters()) p.set_requires_grad(false);
  for (auto& mod : m.modules(/*include_self=*/false))
    if (auto* a = mod->as<Attention>()) a->fold_scale_into_queries();
  if (!bf16) return;
  for (auto& mod : m.modules(/*include_self=*/false))  // after the fold: the scale applied in fp32
    if (auto* lin = mod->as<torch::nn::Linear>()) {
      lin->weight.set_data(lin->weight.to(torch::kBFloat16));
      lin->bias.set_data(lin->bias.to(torch::kBFloat16));
    }
}

void ViTImpl::set_attention(AttentionKernel k) {
  for (auto& m : modules(/*include_self=*/false))
    if (auto* a = m->as<Attention>()) a->kernel = k;
}

std::vector<torch::Tensor> ViTImpl::matrix_operands() {
  // The [B, T, D] layers' biases are added in fp32 arithmetic (module_linear,
  // and fc1's inside bias_gelu): they stay fp32. The heads' run as addmm.
  std::vector<torch::Tensor> out{patch_embed->proj->weight};
  for (const auto& m : *blocks) {
    const auto* b = m->as<Block>();
    for (const auto* lin : {b->attn->qkv.get(), b->attn->proj.get(), b->mlp->fc1.get(), b->mlp->fc2.get()})
      out.push_back(lin->weight);
  }
  for (const auto& lin : {head, head_dist})
    if (lin) {
      out.push_back(lin->weight);
      out.push_back(lin->bias);
    }
  return out;
}

void ViTImpl::use_compute_weights(const ComputeWeights* cw) {
  compute = cw;
  patch_embed->compute = cw;
  for (const auto& m : *blocks) {
    auto* b = m->as<Block>();
    b->attn->compute = cw;
    b->mlp->compute = cw;
  }
}

ViTOutput ViTImpl::forward(const torch::Tensor& images, bool all_tokens, const DropPathScales* drop) {
  const int64_t B = images.size(0);
  auto x = patch_embed(images);  // [B,N,D]
  std::vector<torch::Tensor> toks{cls_token.expand({B, -1, -1})};
  if (spec.dist_token) toks.push_back(dist_token.expand({B, -1, -1}));
  toks.push_back(x);
  x = torch::cat(toks, 1) + pos_embed;
  // Only the head tokens' outputs of the last block reach the heads, so the last
  // block computes just those (keys and values still come from every token).
  const int64_t last = static_cast<int64_t>(blocks->size()) - 1;
  const bool dropping = drop && !drop->empty();
  TORCH_CHECK(!dropping || (drop->attn.size() == blocks->size() && drop->mlp.size() == blocks->size()),
              "drop-path scales for ", drop ? drop->attn.size() : 0, " blocks, the model has ", blocks->size());
  const torch::Tensor none;
  for (int64_t i = 0; i <= last; ++i)
    x = blocks[i]->as<Block>()->forward(x, i == last && !all_tokens ? spec.head_tokens() : 0,
                                        dropping ? drop->attn[i] : none, dropping ? drop->mlp[i] : none);
  x = norm(x);
  ViTOutput out;
  out.logits = module_linear(x.select(1, 0), operand(compute, head->weight), operand(compute, head->bias));
  if (spec.dist_token)
    out.dist_logits =
        module_linear(x.select(1, 1), operand(compute, head_dist->weight), operand(compute, head_dist->bias));
  return out;
}

}  // namespace vitkd
