// model.init, model.decay and model.norm_eps: the initialisations' statistics,
// the weight-decay mask, the LayerNorm epsilon and the configuration errors.
#include <gtest/gtest.h>

#include <cmath>

#include "config/config.hpp"
#include "model/vit.hpp"
#include "optim/flat_params.hpp"
#include "util/error.hpp"

using namespace vitkd;

namespace {

ModelSpec spec(InitScheme init) {
  ModelSpec s;
  s.dim = 192;
  s.depth = 2;
  s.heads = 3;
  s.dist_token = true;
  s.init = init;
  return s;
}

torch::Tensor param(ViT& m, const std::string& name) { return m->named_parameters()[name]; }

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }
double stdev(const torch::Tensor& t) { return t.std().item<double>(); }

// U(-a, a): every value inside, the extremes close to +-a, std a / sqrt(3).
void expect_uniform(const torch::Tensor& t, double a, const std::string& what) {
  EXPECT_LE(max_abs(t), a) << what;
  EXPECT_GT(max_abs(t), 0.95 * a) << what;
  EXPECT_NEAR(stdev(t), a / std::sqrt(3.0), 0.06 * a / std::sqrt(3.0)) << what;
  EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.1 * a) << what;
}

std::string error_of(const std::vector<std::string>& ov) {
  try {
    parse_config("", "test.toml", ov);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ModelInit, TorchDefaults) {
  torch::manual_seed(1);
  ViT m(spec(InitScheme::Torch));
  const double D = 192, M = 768;
  // Patch projection as Conv2d(1, D, 4, 4): fan_in = C*p*p = 16, bound 1/4.
  expect_uniform(param(m, "patch_embed.proj.weight"), 1.0 / std::sqrt(16.0), "patch weight");
  expect_uniform(param(m, "patch_embed.proj.bias"), 1.0 / std::sqrt(16.0), "patch bias");
  EXPECT_NEAR(stdev(param(m, "patch_embed.proj.weight")), 0.144, 0.01);
  // nn.MultiheadAttention: xavier_uniform in_proj, zero biases; out_proj weight as nn.Linear.
  expect_uniform(param(m, "blocks.0.attn.qkv.weight"), std::sqrt(6.0 / (D + 3 * D)), "qkv weight");
  EXPECT_EQ(max_abs(param(m, "blocks.0.attn.qkv.bias")), 0.0);
  EXPECT_EQ(max_abs(param(m, "blocks.1.attn.proj.bias")), 0.0);
  expect_uniform(param(m, "blocks.1.attn.proj.weight"), 1.0 / std::sqrt(D), "proj weight");
  // nn.Linear: weight and bias U(+-1/sqrt(fan_in)).
  expect_uniform(param(m, "blocks.0.mlp.fc1.weight"), 1.0 / std::sqrt(D), "fc1 weight");
  expect_uniform(param(m, "blocks.0.mlp.fc1.bias"), 1.0 / std::sqrt(D), "fc1 bias");
  expect_uniform(param(m, "blocks.1.mlp.fc2.weight"), 1.0 / std::sqrt(M), "fc2 weight");
  expect_uniform(param(m, "blocks.1.mlp.fc2.bias"), 1.0 / std::sqrt(M), "fc2 bias");
  expect_uniform(param(m, "head.weight"), 1.0 / std::sqrt(D), "head weight");
  // Position embedding randn * 0.02, not clipped; tokens zero; norms 1 and 0.
  auto pos = param(m, "pos_embed");
  EXPECT_NEAR(stdev(pos), 0.02, 0.001);
  EXPECT_GT(max_abs(pos), 0.06);
  EXPECT_EQ(max_abs(param(m, "cls_token")), 0.0);
  EXPECT_EQ(max_abs(param(m, "dist_token")), 0.0);
  EXPECT_EQ(max_abs(param(m, "blocks.0.norm1.weight") - 1.0), 0.0);
  EXPECT_EQ(max_abs(param(m, "norm.bias")), 0.0);
}

TEST(ModelInit, TruncNormalIsTheDefault) {
  EXPECT_EQ(ModelSpec().init, InitScheme::TruncNormal);
  torch::manual_seed(1);
  ViT m(spec(InitScheme::TruncNormal));
  for (const char* n : {"patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "pos_embed", "cls_token",
                        "blocks.1.mlp.fc2.weight"}) {
    auto t = param(m, n);
    EXPECT_LE(max_abs(t), 0.04) << n;
    if (t.numel() > 1000) {
      // N(0, 0.02) clamped (not resampled) at 2 sigma: std 0.9595 * 0.02, and
      // P(|Z| > 2) = 4.55 % of the values sit exactly on +-0.04.
      EXPECT_NEAR(stdev(t), 0.0192, 0.0005) << n;
      const double at_clip = (t.abs() >= 0.04f).to(torch::kDouble).mean().item<double>();
      EXPECT_NEAR(at_clip, 0.0455, 0.006) << n;
    }
  }
  EXPECT_EQ(max_abs(param(m, "blocks.0.mlp.fc1.bias")), 0.0);
  EXPECT_EQ(max_abs(param(m, "blocks.0.norm2.weight") - 1.0), 0.0);
  // Deterministic given the seed.
  torch::manual_seed(1);
  ViT again(spec(InitScheme::TruncNormal));
  EXPECT_TRUE(torch::equal(param(m, "pos_embed"), param(again, "pos_embed")));
}

TEST(ModelDecay, MaskFollowsTheModelsScope) {
  torch::manual_seed(0);
  ModelSpec s = spec(InitScheme::TruncNormal);
  ViT matrices(s);
  FlatParams fm(*matrices, 2);
  s.decay = DecayScope::All;
  ViT all(s);
  FlatParams fa(*all, 2);
  EXPECT_DOUBLE_EQ(fa.decay_mask.sum().item<double>(), double(fa.numel));  // padding excluded
  EXPECT_LT(fm.decay_mask.sum().item<double>(), double(fm.numel));
  for (auto& slot : fm.slots) {
    const bool matrix = slot.shape.size() >= 2 && slot.name != "pos_embed" && slot.name != "cls_token" &&
                        slot.name != "dist_token";
    EXPECT_EQ(slot.decay, matrix) << slot.name;
    EXPECT_EQ(fm.decay_mask.narrow(0, slot.offset, slot.numel).sum().item<double>(),
              matrix ? double(slot.numel) : 0.0) << slot.name;
  }
  for (auto& slot : fa.slots) EXPECT_TRUE(slot.decay) << slot.name;
  EXPECT_TRUE(decays("blocks.0.norm1.bias", 1, DecayScope::All));
  EXPECT_FALSE(decays("blocks.0.norm1.bias", 1, DecayScope::Matrices));
}

TEST(ModelNormEps, EveryLayerNormUsesIt) {
  ModelSpec s = spec(InitScheme::TruncNormal);
  EXPECT_DOUBLE_EQ(s.norm_eps, 1e-6);
  s.norm_eps = 1e-5;
  ViT m(s);
  EXPECT_DOUBLE_EQ(m->norm->options.eps(), 1e-5);
  for (size_t i = 0; i < m->blocks->size(); ++i) {
    auto b = m->blocks[i]->as<Block>();
    EXPECT_DOUBLE_EQ(b->norm1->options.eps(), 1e-5);
    EXPECT_DOUBLE_EQ(b->norm2->options.eps(), 1e-5);
  }
  // The epsilon reaches the function: the same weights with epsilon 1e-6 and
  // 1e-1 give different logits.
  torch::manual_seed(0);
  ViT a(spec(InitScheme::TruncNormal));
  ModelSpec s5 = spec(InitScheme::TruncNormal);
  s5.norm_eps = 1e-1;
  ViT b(s5);
  {
    torch::NoGradGuard ng;
    auto pa = a->named_parameters(), pb = b->named_parameters();
    for (auto& p : pa) pb[p.key()].copy_(p.value());
  }
  auto x = torch::randn({2, 1, 28, 28});
  EXPECT_GT((a->forward(x).logits - b->forward(x).logits).abs().max().item<double>(), 1e-4);
}

TEST(ModelOptionsConfig, DefaultsAndOneLineErrors) {
  Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.model_init, InitScheme::TruncNormal);
  EXPECT_EQ(c.model_decay, DecayScope::Matrices);
  EXPECT_DOUBLE_EQ(c.model_norm_eps, 1e-6);
  auto e = error_of({"model.init=xavier"});
  EXPECT_NE(e.find("model.init"), std::string::npos) << e;
  EXPECT_NE(e.find("\"trunc_normal\", \"torch\""), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  e = error_of({"model.decay=bias"});
  EXPECT_NE(e.find("model.decay"), std::string::npos) << e;
  EXPECT_NE(e.find("\"matrices\", \"all\""), std::string::npos) << e;
  for (const char* v : {"model.norm_eps=0", "model.norm_eps=-1e-5", "model.norm_eps=1.5", "model.norm_eps=nan"}) {
    e = error_of({v});
    EXPECT_NE(e.find("model.norm_eps"), std::string::npos) << v << ": " << e;
    EXPECT_NE(e.find("(0, 1)"), std::string::npos) << v << ": " << e;
  }
  EXPECT_EQ(error_of({"model.init=torch", "model.decay=all", "model.norm_eps=1e-5"}), "");
}
