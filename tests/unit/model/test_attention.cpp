// Fused attention against vitkd's own bmm-softmax-bmm (suite FusedAttention,
// label torch2: it needs LibTorch 2.1 or newer and is skipped with the reason
// on 1.13), model.attention's resolution (AttentionKernel), and stochastic
// depth (DropPath): the rate over depth, the keyed per-sample masks and what
// a dropped or kept branch does to the forward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "fixtures.hpp"
#include "model/drop_path.hpp"
#include "model/vit.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;
using vitkd::test::Spec;

namespace {

#define VITKD_SKIP_WITHOUT_FUSED_ATTENTION()                                                      \
  if (!has_fused_attention())                                                                     \
  GTEST_SKIP() << "this LibTorch (" TORCH_VERSION ") has no at::scaled_dot_product_attention with " \
                  "a scale (2.1 and newer); the torch2 lane (jobs/lanes/torch2.sh) runs this test"

// 65 tokens (64 patches and the class token) of 3 heads of 16, two blocks:
// the last block runs its queries on the head tokens only.
ModelSpec attention_spec() { return Spec().image(32).patch(4).dim(48).depth(2).heads(3).classes(7); }

// A model with non-zero biases and tokens, so that every path carries signal.
ViT perturbed_model(const ModelSpec& s, uint64_t seed) {
  torch::manual_seed(seed);
  ViT m(s);
  torch::NoGradGuard ng;
  for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.05);
  return m;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }
double rel_diff(const torch::Tensor& a, const torch::Tensor& ref) { return max_abs(a - ref) / max_abs(ref); }

// The names of the autograd nodes behind `t` (which kernels ran).
std::set<std::string> graph_nodes(const torch::Tensor& t) {
  std::set<std::string> names;
  std::set<const torch::autograd::Node*> seen;
  // Raw pointers: a node is held by std::shared_ptr in LibTorch 1.13 and
  // c10::intrusive_ptr in 2.x.
  std::function<void(torch::autograd::Node*)> walk = [&](torch::autograd::Node* n) {
    if (!n || !seen.insert(n).second) return;
    names.insert(n->name());
    for (const auto& e : n->next_edges()) walk(e.function.get());
  };
  walk(t.grad_fn().get());
  return names;
}
bool has_node(const std::set<std::string>& names, const std::string& part) {
  for (const auto& n : names)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

// Logits and every parameter's gradient (flattened) of one forward/backward.
struct Pass {
  torch::Tensor logits, grads;
  std::set<std::string> nodes;
};
Pass pass(ViT& m, const torch::Tensor& x, const torch::Tensor& y, bool all_tokens, bool bf16) {
  m->zero_grad();
  Pass r;
  torch::Tensor loss;
  {
    AutocastBf16 ac(bf16);
    auto out = m->forward(x, all_tokens).prediction();
    r.nodes = graph_nodes(out);
    r.logits = out.detach().to(torch::kFloat32);
    loss = torch::cross_entropy_loss(out.to(torch::kFloat32), y);
  }
  loss.backward();
  std::vector<torch::Tensor> g;
  for (auto& p : m->parameters()) g.push_back(p.grad().flatten().clone());
  r.grads = torch::cat(g);
  return r;
}

}  // namespace

TEST(FusedAttention, ForwardAndGradientsEqualTheUnfusedPathInFp32) {
  VITKD_SKIP_WITHOUT_FUSED_ATTENTION();
  // Measured on LibTorch 2.15: at most 7.4e-7 (logits) and 8.8e-7 (gradients).
  for (bool dist : {false, true}) {
    ModelSpec s = attention_spec();
    s.dist_token = dist;
    ViT m = perturbed_model(s, 11);
    auto x = torch::randn({6, 1, 32, 32});
    auto y = torch::tensor({0, 3, 6, 1, 2, 5}, torch::kLong);
    for (bool all : {false, true}) {
      m->set_attention(AttentionKernel::Unfused);
      const Pass ref = pass(m, x, y, all, false);
      m->set_attention(AttentionKernel::Fused);
      const Pass got = pass(m, x, y, all, false);
      // The two kernels really ran: LibTorch's fused op in one graph, bmm and
      // softmax in the other.
      EXPECT_TRUE(has_node(ref.nodes, "Softmax")) << "unfused graph without softmax";
      EXPECT_FALSE(has_node(got.nodes, "Softmax")) << "fused graph with a separate softmax";
      EXPECT_TRUE(has_node(got.nodes, "Attention")) << "fused graph without LibTorch's attention node";
      EXPECT_LE(rel_diff(got.logits, ref.logits), 1e-5) << "dist " << dist << " all_tokens " << all;
      EXPECT_GT(max_abs(ref.grads), 1e-3);
      EXPECT_LE(rel_diff(got.grads, ref.grads), 1e-5) << "dist " << dist << " all_tokens " << all;
    }
  }
}

TEST(FusedAttention, FoldedScaleEqualsTheUnfusedPath) {
  VITKD_SKIP_WITHOUT_FUSED_ATTENTION();
  // The frozen teacher's queries carry the scale (fold_scale_into_queries);
  // the fused kernel then runs with scale 1.
  ViT m = perturbed_model(attention_spec(), 12);
  auto x = torch::randn({4, 1, 32, 32});
  torch::NoGradGuard ng;
  m->set_attention(AttentionKernel::Unfused);
  const auto ref = m->forward(x).prediction();
  for (auto& mod : m->modules(/*include_self=*/false))
    if (auto* a = mod->as<Attention>()) a->fold_scale_into_queries();
  m->set_attention(AttentionKernel::Fused);
  EXPECT_LE(rel_diff(m->forward(x).prediction(), ref), 1e-5);
}

TEST(FusedAttention, Bf16AutocastAgreesWithinBf16Rounding) {
  VITKD_SKIP_WITHOUT_FUSED_ATTENTION();
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  // Under bf16 autocast both kernels round differently; each must stay as
  // close to the other as bf16's rounding allows: within 4 units of bf16's
  // epsilon (2^-8) of the largest logit and gradient (measured on LibTorch
  // 2.15: 1.7 and 2.2 units), and no farther apart than twice the distance of
  // either from the fp32 result.
  ViT m = perturbed_model(attention_spec(), 13);
  auto x = torch::randn({6, 1, 32, 32});
  auto y = torch::tensor({0, 3, 6, 1, 2, 5}, torch::kLong);
  const double eps = std::ldexp(1.0, -8);
  m->set_attention(AttentionKernel::Unfused);
  const Pass f32 = pass(m, x, y, false, false);
  const Pass ref = pass(m, x, y, false, true);
  m->set_attention(AttentionKernel::Fused);
  const Pass got = pass(m, x, y, false, true);
  EXPECT_TRUE(has_node(got.nodes, "Attention"));
  EXPECT_LE(rel_diff(got.logits, ref.logits), 4 * eps);
  EXPECT_LE(rel_diff(got.grads, ref.grads), 4 * eps);
  EXPECT_LE(max_abs(got.logits - ref.logits),
            2 * std::max(max_abs(ref.logits - f32.logits), max_abs(got.logits - f32.logits)));
}

// `steps` AdamW steps on fixed batches from the same start: the loss of each
// step and the final parameters (flattened).
struct Trajectory {
  std::vector<double> losses;
  torch::Tensor params;
};
Trajectory train_tiny(AttentionKernel kernel, bool bf16, int steps) {
  ViT m = perturbed_model(attention_spec(), 21);
  m->set_attention(kernel);
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.05));
  torch::manual_seed(22);
  auto xs = torch::randn({4, 8, 1, 32, 32});
  auto ys = torch::randint(0, 7, {4, 8}, torch::kLong);
  Trajectory t;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    torch::Tensor loss;
    {
      AutocastBf16 ac(bf16);
      loss = torch::cross_entropy_loss(m->forward(xs[i % 4]).prediction().to(torch::kFloat32), ys[i % 4]);
    }
    loss.backward();
    opt.step();
    t.losses.push_back(loss.item<double>());
  }
  // Every parameter but the attention's key bias: its gradient is
  // analytically zero (softmax ignores a shift shared by a query's scores),
  // so AdamW turns rounding noise into lr-sized steps there (as
  // tests/tools/compare_checkpoints.py says).
  std::vector<torch::Tensor> p;
  const int64_t D = m->spec.dim;
  for (auto& q : m->named_parameters()) {
    auto v = q.value().detach();
    if (q.key().size() >= 13 && q.key().compare(q.key().size() - 13, 13, "attn.qkv.bias") == 0)
      v = torch::cat({v.narrow(0, 0, D), v.narrow(0, 2 * D, D)});
    p.push_back(v.flatten().clone());
  }
  t.params = torch::cat(p);
  return t;
}

TEST(FusedAttention, TrainingTrajectoryEqualsTheUnfusedPath) {
  VITKD_SKIP_WITHOUT_FUSED_ATTENTION();
  const int steps = 12;
  const Trajectory ref = train_tiny(AttentionKernel::Unfused, false, steps);
  const Trajectory got = train_tiny(AttentionKernel::Fused, false, steps);
  ASSERT_LT(ref.losses.back(), ref.losses.front());  // it trains
  for (int i = 0; i < steps; ++i)
    EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-5 * std::abs(ref.losses[i])) << "step " << i + 1;
  const Trajectory start = train_tiny(AttentionKernel::Unfused, false, 0);
  // Relative to how far training moved the parameters.
  const double moved = (ref.params - start.params).norm().item<double>();
  EXPECT_LE((got.params - ref.params).norm().item<double>(), 1e-5 * ref.params.norm().item<double>());
  EXPECT_LE((got.params - ref.params).norm().item<double>(), 1e-3 * moved);
}

TEST(FusedAttention, Bf16TrainingTrajectoryAgreesWithinBf16Rounding) {
  VITKD_SKIP_WITHOUT_FUSED_ATTENTION();
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  const int steps = 12;
  const double eps = std::ldexp(1.0, -8);
  const Trajectory ref = train_tiny(AttentionKernel::Unfused, true, steps);
  const Trajectory got = train_tiny(AttentionKernel::Fused, true, steps);
  ASSERT_LT(ref.losses.back(), ref.losses.front());
  for (int i = 0; i < steps; ++i)
    EXPECT_NEAR(got.losses[i], ref.losses[i], 4 * eps * std::abs(ref.losses[i])) << "step " << i + 1;
  // The parameters: the fused run in bf16 ends no farther from the unfused
  // one than twice the distance bf16's rounding puts between the unfused run
  // in bf16 and in fp32 (measured on LibTorch 2.15: 0.87 times it; a query
  // scale of 1/sqrt(dim) instead of 1/sqrt(head size): 2.8 times).
  const Trajectory f32 = train_tiny(AttentionKernel::Unfused, false, steps);
  EXPECT_LE((got.params - ref.params).norm().item<double>(), 2 * (ref.params - f32.params).norm().item<double>());
}

TEST(AttentionKernel, SettingResolvesForThisLibTorch) {
  EXPECT_EQ(attention_kernel(AttentionKernel::Unfused, "x.toml"), AttentionKernel::Unfused);
  EXPECT_EQ(attention_kernel(AttentionKernel::Auto, "x.toml"), AttentionKernel::Auto);
  EXPECT_EQ(ViT(Spec::tiny())->blocks[0]->as<Block>()->attn->kernel, AttentionKernel::Auto);
  const std::string err = test::user_error_of([] { attention_kernel(AttentionKernel::Fused, "x.toml"); });
  if (has_fused_attention()) {
    EXPECT_EQ(err, "");
    EXPECT_EQ(attention_kernel(AttentionKernel::Fused, "x.toml"), AttentionKernel::Fused);
  } else {  // one line: what, where, how to fix
    EXPECT_NE(err.find("x.toml: model.attention = \"fused\" needs LibTorch 2.1"), std::string::npos) << err;
    EXPECT_NE(err.find("set model.attention = \"auto\" or \"unfused\""), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // auto: fused where LibTorch has it, on a GPU or outside bf16; forced
  // kernels stay as set.
  const auto fused_here = has_fused_attention() ? AttentionKernel::Fused : AttentionKernel::Unfused;
  EXPECT_EQ(attention_runs(AttentionKernel::Auto, false, false), fused_here);
  EXPECT_EQ(attention_runs(AttentionKernel::Auto, true, true), fused_here);
  EXPECT_EQ(attention_runs(AttentionKernel::Auto, false, true), AttentionKernel::Unfused);
  EXPECT_EQ(attention_runs(AttentionKernel::Unfused, true, false), AttentionKernel::Unfused);
  EXPECT_EQ(attention_runs(AttentionKernel::Fused, false, true), AttentionKernel::Fused);
}

TEST(AttentionKernel, AutoRunsWhatItsRuleSaysOnTheCpu) {
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  ViT m = perturbed_model(attention_spec(), 14);
  auto x = torch::randn({2, 1, 32, 32});
  auto y = torch::tensor({0, 3}, torch::kLong);
  const Pass f32 = pass(m, x, y, false, false), bf16 = pass(m, x, y, false, true);
  // fp32: LibTorch's fused op where it has one; bf16 on the CPU: bmm-softmax-bmm.
  EXPECT_EQ(has_node(f32.nodes, "Attention"), has_fused_attention());
  EXPECT_EQ(has_node(f32.nodes, "Softmax"), !has_fused_attention());
  EXPECT_TRUE(has_node(bf16.nodes, "Softmax"));
  EXPECT_FALSE(has_node(bf16.nodes, "Attention"));
}

// ---- stochastic depth ---------------------------------------------------------

TEST(DropPath, RateIsLinearOverDepthAsTimm) {
  // timm: torch.linspace(0, drop_path_rate, depth)
  for (int64_t i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(drop_path_block_rate(0.1, i, 12), 0.1 * i / 11.0);
  EXPECT_EQ(drop_path_block_rate(0.1, 0, 12), 0.0);
  EXPECT_DOUBLE_EQ(drop_path_block_rate(0.1, 11, 12), 0.1);
  EXPECT_EQ(drop_path_block_rate(0.5, 0, 1), 0.0);  // one block: linspace(0, r, 1) = [0]
  EXPECT_EQ(drop_path_block_rate(0.0, 5, 12), 0.0);
}

TEST(DropPath, KeepIsAPureFunctionOfItsKeyWithTheKeepProbability) {
  const double keep = 0.7;
  const int64_t n = 40000;
  int64_t kept_a = 0, kept_both = 0, same_epoch1 = 0, same_seed2 = 0, same_block = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool a = drop_path_keeps(5, 3, i, 2, DropBranch::Attention, keep);
    EXPECT_EQ(a, drop_path_keeps(5, 3, i, 2, DropBranch::Attention, keep));  // pure
    const bool m = drop_path_keeps(5, 3, i, 2, DropBranch::Mlp, keep);
    kept_a += a;
    kept_both += a && m;
    same_epoch1 += a == drop_path_keeps(5, 4, i, 2, DropBranch::Attention, keep);
    same_seed2 += a == drop_path_keeps(6, 3, i, 2, DropBranch::Attention, keep);
    same_block += a == drop_path_keeps(5, 3, i, 3, DropBranch::Attention, keep);
  }
  // Bernoulli(keep), and independent across branch, epoch, seed and block
  // (agreement of two independent draws: keep^2 + (1 - keep)^2 = 0.58); four
  // standard deviations.
  const auto within = [&](int64_t count, double p) {
    return std::abs(double(count) / n - p) <= 4 * std::sqrt(p * (1 - p) / n);
  };
  EXPECT_TRUE(within(kept_a, keep)) << kept_a;
  EXPECT_TRUE(within(kept_both, keep * keep)) << kept_both;
  const double agree = keep * keep + (1 - keep) * (1 - keep);
  EXPECT_TRUE(within(same_epoch1, agree)) << same_epoch1;
  EXPECT_TRUE(within(same_seed2, agree)) << same_seed2;
  EXPECT_TRUE(within(same_block, agree)) << same_block;
  for (int64_t i = 0; i < 100; ++i) EXPECT_TRUE(drop_path_keeps(5, 3, i, 0, DropBranch::Mlp, 1.0));
}

TEST(DropPath, ScalesFollowTheSampleNotTheBatch) {
  const DropPathSpec spec{0.4, 9};
  EXPECT_TRUE(drop_path_scales(DropPathSpec{0.0, 9}, 3, 0, torch::arange(8), torch::kCPU).empty());
  const auto idx = torch::tensor({17, 4, 230, 9, 31}, torch::kLong);
  const DropPathScales s = drop_path_scales(spec, 3, 2, idx, torch::kCPU);
  ASSERT_EQ(s.attn.size(), 3u);
  EXPECT_FALSE(s.attn[0].defined());  // block 0: rate 0, nothing to scale
  EXPECT_FALSE(s.mlp[0].defined());
  for (int64_t b = 1; b < 3; ++b) {
    const double keep = 1.0 - 0.4 * b / 2.0;
    const float kept = 1.0f / static_cast<float>(keep);
    for (const auto& [t, branch] : {std::pair{s.attn[b], DropBranch::Attention}, std::pair{s.mlp[b], DropBranch::Mlp}}) {
      ASSERT_EQ(t.sizes(), torch::IntArrayRef({5, 1, 1}));
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t index = idx[i].item<int64_t>();
        EXPECT_EQ(t[i].item<float>(), drop_path_keeps(9, 2, index, b, branch, keep) ? kept : 0.0f);
      }
    }
    // A sample's factors are its own whatever else is in the batch (so on any
    // rank count): sample 230 alone gets row 2's.
    const DropPathScales one = drop_path_scales(spec, 3, 2, torch::tensor({230}, torch::kLong), torch::kCPU);
    EXPECT_TRUE(torch::equal(one.attn[b][0], s.attn[b][2]));
    EXPECT_TRUE(torch::equal(one.mlp[b][0], s.mlp[b][2]));
  }
}

TEST(DropPath, DroppedBranchVanishesAndKeptBranchIsScaled) {
  // Block 1's attention branch dropped for sample 0 and kept with factor 1.25
  // for sample 1, its MLP branch the other way round: each sample's logits
  // equal those of a model whose branch output is zeroed or scaled in its weights.
  const ModelSpec s = Spec().image(8).patch(2).dim(24).depth(2).heads(3);
  ViT m = perturbed_model(s, 5);
  auto x = torch::randn({2, 1, 8, 8});
  DropPathScales d;
  d.attn = {torch::Tensor(), torch::tensor({0.0f, 1.25f}).view({2, 1, 1})};
  d.mlp = {torch::Tensor(), torch::tensor({1.25f, 0.0f}).view({2, 1, 1})};
  const auto got = m->forward(x, false, &d).logits.detach();
  auto with_branch_factors = [&](double attn_f, double mlp_f) {
    ViT c = perturbed_model(s, 5);
    torch::NoGradGuard ng;
    auto* blk = c->blocks[1]->as<Block>();
    blk->attn->proj->weight.mul_(attn_f);
    blk->attn->proj->bias.mul_(attn_f);
    blk->mlp->fc2->weight.mul_(mlp_f);
    blk->mlp->fc2->bias.mul_(mlp_f);
    return c->forward(x).logits;
  };
  EXPECT_LE(rel_diff(got[0], with_branch_factors(0.0, 1.25)[0]), 1e-5);
  EXPECT_LE(rel_diff(got[1], with_branch_factors(1.25, 0.0)[1]), 1e-5);
  EXPECT_GT(max_abs(got - m->forward(x).logits.detach()), 1e-3);  // dropping changed something

  // A branch dropped for the whole batch gets no gradient; the same step
  // without stochastic depth (an empty DropPathScales) is bitwise the plain one.
  d.attn[1] = torch::zeros({2, 1, 1});
  m->zero_grad();
  m->forward(x, false, &d).logits.sum().backward();
  EXPECT_EQ(max_abs(m->blocks[1]->as<Block>()->attn->qkv->weight.grad()), 0.0);
  EXPECT_GT(max_abs(m->blocks[0]->as<Block>()->attn->qkv->weight.grad()), 0.0);
  m->zero_grad();
  const DropPathScales off = drop_path_scales(DropPathSpec{0.0, 1}, 2, 0, torch::arange(2), torch::kCPU);
  auto a = m->forward(x, false, &off).logits;
  a.sum().backward();
  const auto ga = m->blocks[1]->as<Block>()->attn->qkv->weight.grad().clone();
  m->zero_grad();
  auto b = m->forward(x).logits;
  b.sum().backward();
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(ga, m->blocks[1]->as<Block>()->attn->qkv->weight.grad()));
}

TEST(DropPath, ConfigKeysAreCheckedInOneLine) {
  auto error_of = [](const std::string& text) {
    return test::user_error_of([&] { parse_config(text, "t.toml"); });
  };
  EXPECT_EQ(parse_config("", "t.toml").model_drop_path, 0.0);  // off by default
  EXPECT_EQ(parse_config("[model]\ndrop_path = 0.1\n", "t.toml").model_drop_path, 0.1);
  EXPECT_EQ(parse_config("[model]\ndrop_path = 0\n", "t.toml").model_drop_path, 0.0);
  for (const char* bad : {"1.0", "1", "-0.1", "nan", "inf"}) {
    const std::string e = error_of(std::string("[model]\ndrop_path = ") + bad + "\n");
    EXPECT_NE(e.find("t.toml: invalid value for 'model.drop_path': must lie in [0, 1)"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(parse_config("", "t.toml").model_attention, AttentionKernel::Auto);
  const std::string e = error_of("[model]\nattention = \"fuse\"\n");
  EXPECT_NE(e.find("'model.attention': \"fuse\" is not one of \"auto\", \"fused\", \"unfused\""),
            std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'fused'"), std::string::npos) << e;
}
