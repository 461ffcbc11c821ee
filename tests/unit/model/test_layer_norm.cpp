// LayerNorm straight into bf16 (model/layer_norm.hpp) against float64
// references and LibTorch's LayerNorm followed by the cast: values,
// gradients, independence of the thread count, and the fp32 path left to
// LibTorch bit for bit.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "model/layer_norm.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;

namespace {

constexpr double kEps = 1e-6;

struct Case {
  torch::Tensor x, gamma, beta;
};

// Rows of several widths (a partial lane block, ViT-S's 384, a width that is
// no multiple of 16), an offset mean (a one-pass variance would lose it),
// more than one backward row block (256 rows), and rows where eps matters.
std::vector<Case> cases() {
  torch::manual_seed(11);
  std::vector<Case> out;
  for (auto s : std::vector<std::vector<int64_t>>{{2, 3, 7}, {2, 197, 384}, {1, 300, 769}}) {
    const int64_t d = s.back();
    out.push_back({torch::randn(s) * 2 + 3, torch::randn({d}) * 0.5 + 1, torch::randn({d}) * 0.1});
  }
  // Rows whose variance (1e-8) is below eps: eps sets the scale.
  out.push_back({torch::randn({1, 4, 64}) * 1e-4, torch::randn({64}) * 0.5 + 1, torch::randn({64}) * 0.1});
  return out;
}

torch::Tensor reference(const Case& c) {
  const int64_t d = c.x.size(-1);
  return torch::layer_norm(c.x.to(torch::kDouble), {d}, c.gamma.to(torch::kDouble), c.beta.to(torch::kDouble), kEps);
}

// Largest |a - b| in units of b's bf16 spacing, after an absolute allowance
// of 1e-5 of b's largest value: an output near zero is a sum that cancels,
// whose fp32 error is relative to its terms, not to itself.
double bf16_ulps(const torch::Tensor& a, const torch::Tensor& b) {
  auto bd = b.to(torch::kDouble), ad = a.to(torch::kDouble);
  auto spacing = torch::exp2(torch::floor(torch::log2(bd.abs().clamp_min(1e-30))) - 7);
  auto excess = ((ad - bd).abs() - 1e-5 * bd.abs().max()).clamp_min(0);
  return (excess / spacing).max().item<double>();
}

double rel_err(const torch::Tensor& a, const torch::Tensor& ref) {
  auto r = ref.to(torch::kDouble);
  return ((a.to(torch::kDouble) - r).abs().max() / r.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

TEST(LayerNormBf16, ValuesAreTheFloat64NormRoundedOnceAndLibTorchsCastWithinAStep) {
  for (const auto& c : cases()) {
    SCOPED_TRACE("width " + std::to_string(c.x.size(-1)));
    auto y = layer_norm_bf16(c.x, c.gamma, c.beta, kEps);
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
    ASSERT_EQ(y.sizes(), c.x.sizes());
    EXPECT_LE(bf16_ulps(y, reference(c)), 1.0);
    // LibTorch's fp32 LayerNorm, then autocast's cast: the same values but
    // where the fp32 sums, added in another order, straddle a rounding point.
    auto aten = torch::layer_norm(c.x, {c.x.size(-1)}, c.gamma, c.beta, kEps).to(torch::kBFloat16);
    EXPECT_LE(bf16_ulps(y, aten.to(torch::kDouble)), 1.0);
    const double differ = (y != aten).to(torch::kDouble).mean().item<double>();
    EXPECT_LE(differ, 0.01);
  }
}

TEST(LayerNormBf16, GradientsAreTheFloat64GradientsOfTheBf16OutputGradient) {
  for (const auto& c : cases()) {
    SCOPED_TRACE("width " + std::to_string(c.x.size(-1)));
    auto x = c.x.clone().requires_grad_(true), g = c.gamma.clone().requires_grad_(true),
         b = c.beta.clone().requires_grad_(true);
    auto dy = torch::randn(c.x.sizes()).to(torch::kBFloat16);
    layer_norm_bf16(x, g, b, kEps).backward(dy);
    ASSERT_EQ(x.grad().scalar_type(), torch::kFloat);
    auto xd = c.x.to(torch::kDouble).requires_grad_(true), gd = c.gamma.to(torch::kDouble).requires_grad_(true),
         bd = c.beta.to(torch::kDouble).requires_grad_(true);
    torch::layer_norm(xd, {c.x.size(-1)}, gd, bd, kEps).backward(dy.to(torch::kDouble));
    EXPECT_LE(rel_err(x.grad(), xd.grad()), 1e-5);
    EXPECT_LE(rel_err(g.grad(), gd.grad()), 1e-5);
    EXPECT_LE(rel_err(b.grad(), bd.grad()), 1e-5);
  }
}

TEST(LayerNormBf16, GradientsDoNotDependOnTheThreadCount) {
  const auto c = cases()[2];
  auto dy = torch::randn(c.x.sizes()).to(torch::kBFloat16);
  const int before = at::get_num_threads();
  std::vector<std::vector<torch::Tensor>> runs;
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    auto x = c.x.clone().requires_grad_(true), g = c.gamma.clone().requires_grad_(true),
         b = c.beta.clone().requires_grad_(true);
    layer_norm_bf16(x, g, b, kEps).backward(dy);
    runs.push_back({x.grad(), g.grad(), b.grad()});
  }
  at::set_num_threads(before);
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[r][i])) << "run " << r << " grad " << i;
}

TEST(LayerNormBf16, TheModuleTakesItOnlyUnderBf16Autocast) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({384}).eps(kEps));
  {
    torch::NoGradGuard ng;
    norm->weight.copy_(torch::randn({384}) * 0.5 + 1);
    norm->bias.copy_(torch::randn({384}) * 0.1);
  }
  auto x = torch::randn({2, 197, 384});
  // Without autocast: LibTorch's LayerNorm, bit for bit (the fp32 path).
  auto plain = norm_for_products(norm, x);
  ASSERT_EQ(plain.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(plain, norm(x)));
  // Under bf16 autocast: bf16, within a step of LibTorch's norm cast.
  AutocastBf16 ac(true, torch::kCPU);
  auto fused = norm_for_products(norm, x);
  ASSERT_EQ(fused.scalar_type(), torch::kBFloat16);
  EXPECT_LE(bf16_ulps(fused, norm(x).to(torch::kDouble)), 1.0);
  // A non-contiguous input (the last block's head tokens) keeps LibTorch's path.
  auto slice = x.narrow(1, 0, 2);
  EXPECT_EQ(norm_for_products(norm, slice).scalar_type(), torch::kFloat);
}

TEST(LayerNormBf16, ResultsDoNotDependOnWhereTheDataLies) {
  // The same values at every offset from a 64-byte boundary, and with the
  // heap shifted: the vectorised loops must give the same bits wherever
  // their rows lie. (A build that let GCC contract these loops into FMAs gave
  // one of two results per process; this test did not see it, the e2e
  // compute_copy cases did, one run in two or three. CMakeLists.txt.)
  auto all = cases();
  all.push_back({torch::randn({6, 1, 8}), torch::randn({8}) * 0.5 + 1, torch::randn({8}) * 0.1});  // the tests' tiny model
  for (const auto& c : all) {
  SCOPED_TRACE("width " + std::to_string(c.x.size(-1)));
  const int64_t numel = c.x.numel();
  auto dy0 = torch::randn(c.x.sizes()).to(torch::kBFloat16);
  std::vector<std::vector<torch::Tensor>> runs;
  std::vector<std::unique_ptr<char[]>> shift;
  for (int64_t off : {0, 1, 3, 8, 15}) {
    for (int k = 0; k < 8; ++k) shift.emplace_back(new char[static_cast<size_t>(24 + 16 * off)]);
    auto xb = torch::empty({numel + 16}), gb = torch::empty({c.gamma.numel() + 16});
    auto dyb = torch::empty({numel + 16}, torch::kBFloat16);
    auto x = xb.narrow(0, off, numel).view(c.x.sizes()).copy_(c.x).requires_grad_(true);
    auto g = gb.narrow(0, off, c.gamma.numel()).copy_(c.gamma).requires_grad_(true);
    auto b = c.beta.clone().requires_grad_(true);
    auto dy = dyb.narrow(0, off, numel).view(c.x.sizes()).copy_(dy0);
    auto y = layer_norm_bf16(x, g, b, kEps);
    y.backward(dy);
    runs.push_back({y.detach(), x.grad(), g.grad(), b.grad()});
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(torch::equal(runs[0][i], runs[r][i])) << "offset run " << r << " output " << i;
  }
}
