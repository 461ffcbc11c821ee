#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "model/vit.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;

TEST(ViT, ParameterCountFormulaMatchesModule) {
  for (bool dist : {false, true}) {
    ModelSpec s;
    s.dist_token = dist;
    ViT m(s);
    int64_t n = 0;
    for (auto& p : m->parameters()) n += p.numel();
    EXPECT_EQ(n, s.parameter_count());
  }
  ModelSpec teacher;  // the Fashion-MNIST teacher: dim 192, depth 6
  EXPECT_NEAR(teacher.parameter_count() / 1e6, 2.7, 0.05);
}

TEST(ViT, NamesAreCheckpointKeys) {
  ModelSpec s;
  s.depth = 2;
  s.dist_token = true;
  ViT m(s);
  auto named = m->named_parameters();
  for (const char* k : {"patch_embed.proj.weight", "cls_token", "dist_token", "pos_embed",
                        "blocks.1.attn.qkv.weight", "blocks.0.mlp.fc2.bias", "blocks.0.norm1.weight",
                        "norm.bias", "head.weight", "head_dist.weight"})
    EXPECT_TRUE(named.contains(k)) << k;
}

TEST(ViT, ShapesAndBf16) {
  ModelSpec s;
  s.image_size = 16;
  s.channels = 3;
  s.dim = 32;
  s.depth = 2;
  s.heads = 4;
  s.classes = 5;
  s.dist_token = true;
  torch::manual_seed(0);
  ViT m(s);
  auto x = torch::randn({3, 3, 16, 16});
  auto out = m->forward(x);
  EXPECT_EQ(out.logits.sizes(), torch::IntArrayRef({3, 5}));
  EXPECT_EQ(out.dist_logits.sizes(), torch::IntArrayRef({3, 5}));
  torch::Tensor bf;
  {
    AutocastBf16 ac(true);
    bf = m->forward(x).logits;
  }
  EXPECT_EQ(bf.scalar_type(), torch::kBFloat16);  // the head ran in bf16
  EXPECT_LT((bf.to(torch::kFloat32) - out.logits).abs().max().item<double>(), 0.1);
  // Autocast ends with its scope.
  EXPECT_EQ(m->forward(x).logits.scalar_type(), torch::kFloat32);
}

TEST(ViT, SamplesAreIndependent) {
  // A sample's logits do not depend on the other samples in the batch.
  ModelSpec s;
  s.image_size = 8;
  s.dim = 16;
  s.depth = 1;
  s.heads = 2;
  torch::manual_seed(0);
  ViT m(s);
  auto x = torch::randn({4, 1, 8, 8});
  auto all = m->forward(x).logits;
  auto one = m->forward(x.narrow(0, 2, 1)).logits;
  EXPECT_LT((all.narrow(0, 2, 1) - one).abs().max().item<double>(), 1e-5);
}

TEST(ViT, HeadTokenLastBlockEqualsFullLastBlock) {
  // ViT::forward runs its last block on the head tokens only; the logits and
  // every parameter's gradient must equal those of the full block (fp32).
  for (bool dist : {false, true}) {
    ModelSpec s;
    s.image_size = 8;
    s.patch = 2;
    s.dim = 24;
    s.depth = 2;
    s.heads = 3;
    s.dist_token = dist;
    torch::manual_seed(3);
    ViT m(s);
    {  // non-zero tokens and biases, so that every path carries signal
      torch::NoGradGuard ng;
      for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.05);
    }
    auto x = torch::randn({5, 1, 8, 8});
    auto y = torch::tensor({0, 3, 9, 1, 2}, torch::kLong);
    std::vector<torch::Tensor> logits, grads;
    for (bool all : {false, true}) {
      m->zero_grad();
      ViTOutput out = m->forward(x, all);
      auto loss = torch::cross_entropy_loss(out.prediction(), y);
      loss.backward();
      logits.push_back(out.prediction().detach());
      std::vector<torch::Tensor> g;
      for (auto& p : m->parameters()) g.push_back(p.grad().flatten().clone());
      grads.push_back(torch::cat(g));
    }
    EXPECT_LT((logits[0] - logits[1]).abs().max().item<double>(), 1e-5) << "dist " << dist;
    EXPECT_GT(grads[1].abs().max().item<double>(), 1e-3);
    EXPECT_LT((grads[0] - grads[1]).abs().max().item<double>(),
              1e-5 * grads[1].abs().max().item<double>()) << "dist " << dist;
  }
}

TEST(ViT, ForwardFlopsCountTheShortLastBlock) {
  // Hand count for D=192, depth 6, M=768, T=50 (28x28, patch 4), K=10, one head token.
  ModelSpec s;
  const double D = 192, M = 768, T = 50, N = 49, P = 16, K = 10;
  const double full_block = 2 * T * D * 3 * D + 4 * T * T * D + 2 * T * D * D + 4 * T * D * M;
  const double last_block = 2 * T * D * 2 * D + 2 * D * D + 4 * T * D + 2 * D * D + 4 * D * M;
  EXPECT_DOUBLE_EQ(s.forward_flops(), 2 * N * P * D + 5 * full_block + last_block + 2 * D * K);
}

TEST(ViT, DescribeIsSafeForCorruptSpecs) {
  // A checkpoint's attributes may hold anything; describing them for the
  // error message must not convert NaN to an integer or overflow (UBSan).
  ModelSpec bad;
  bad.mlp_ratio = std::nan("");
  bad.classes = INT64_MIN;
  EXPECT_FALSE(bad.countable());
  EXPECT_EQ(bad.mlp_hidden(), -1);
  const std::string d = bad.describe();
  EXPECT_EQ(d.find("parameters"), std::string::npos) << d;
  EXPECT_NE(d.find("mlp ratio nan"), std::string::npos) << d;
  ModelSpec good;
  EXPECT_TRUE(good.countable());
  EXPECT_NE(good.describe().find(std::to_string(good.parameter_count()) + " parameters"),
            std::string::npos);
}
