// The bf16 softmax (model/softmax.hpp) against float64 references: values,
// gradients, the fp32 path left to LibTorch bit for bit, and independence of
// the thread count.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fixtures.hpp"
#include "model/softmax.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;
using vitkd::test::bf16_ulps;

namespace {

// bf16 scores of rows of several lengths (a partial lane block, one lane, the
// attention's 197 and 65, and a long row), values up to +-40 so that exp
// would overflow without the row maximum subtracted.
std::vector<torch::Tensor> score_cases() {
  torch::manual_seed(5);
  std::vector<torch::Tensor> out;
  for (int64_t n : {1, 7, 16, 65, 197, 1000})
    out.push_back((torch::randn({3, 5, n}) * 12).clamp(-40, 40).to(torch::kBFloat16));
  out.push_back((torch::randn({2, 6, 197}) * 3 + 100).to(torch::kBFloat16));  // exp(x) would overflow
  return out;
}

}  // namespace

TEST(Softmax, Bf16ProbabilitiesAreTheFloat64ValuesRoundedOnce) {
  for (const auto& x : score_cases()) {
    SCOPED_TRACE("row length " + std::to_string(x.size(-1)));
    auto y = softmax_lastdim(x);
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
    ASSERT_EQ(y.sizes(), x.sizes());
    auto ref = x.to(torch::kDouble).softmax(-1);
    // Rounded once from a value within fp32 error of the exact one: at most
    // half a bf16 step plus the fp32 error; one step allows for the ties.
    EXPECT_LE(bf16_ulps(y, ref), 1.0);
    // The rows sum to 1 within the rounding of n bf16 values.
    auto sums = y.to(torch::kDouble).sum(-1);
    EXPECT_LE((sums - 1).abs().max().item<double>(), 4e-3 * std::sqrt(double(x.size(-1))));
    EXPECT_FALSE(y.isnan().any().item<bool>());
  }
}

TEST(Softmax, Bf16GradientIsTheFloat64GradientOfTheBf16Probabilities) {
  for (const auto& x0 : score_cases()) {
    SCOPED_TRACE("row length " + std::to_string(x0.size(-1)));
    auto x = x0.clone().requires_grad_(true);
    auto y = softmax_lastdim(x);
    auto dy = torch::randn(x.sizes()).to(torch::kBFloat16);
    auto dx = torch::autograd::grad({y}, {x}, {dy})[0];
    ASSERT_EQ(dx.scalar_type(), torch::kBFloat16);
    // The backward reads the bf16 probabilities it saved: dx = y (dy - <dy, y>).
    auto yd = y.detach().to(torch::kDouble), gd = dy.to(torch::kDouble);
    auto ref = yd * (gd - (gd * yd).sum(-1, true));
    // Rounded once from an fp32 value; where <dy, y> nearly cancels dy the
    // fp32 error is relative to |dy|, not to the difference.
    auto tol = yd.abs() * (gd.abs() + 1) * 1e-5 + ref.abs() * std::ldexp(1.0, -8);
    EXPECT_TRUE(((dx.to(torch::kDouble) - ref).abs() <= tol).all().item<bool>())
        << "max error " << (dx.to(torch::kDouble) - ref).abs().max().item<double>();
  }
}

TEST(Softmax, MinusInfinityScoresGetProbabilityZero) {
  // A masked score (-inf) contributes nothing: probability 0 and the others
  // those of the unmasked scores alone (rows that end inside a lane block,
  // fill it and span several).
  torch::manual_seed(9);
  for (int64_t n : {5, 16, 197}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    auto x = (torch::randn({4, n}) * 4).to(torch::kBFloat16);
    auto mask = torch::rand({4, n}) < 0.3;
    mask.select(1, 0).fill_(false);  // at least one score per row
    auto xm = x.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto y = softmax_lastdim(xm);
    EXPECT_TRUE(torch::equal(y.masked_select(mask), torch::zeros({mask.sum().item<int64_t>()}, y.options())));
    auto ref = xm.to(torch::kDouble).softmax(-1);
    EXPECT_LE(bf16_ulps(y, ref), 1.0);
  }
}

TEST(Softmax, Fp32AndOtherDtypesAreLibTorchsSoftmaxBitForBit) {
  torch::manual_seed(6);
  auto x = torch::randn({4, 3, 197}) * 5;
  EXPECT_TRUE(torch::equal(softmax_lastdim(x), x.softmax(-1)));
  auto xd = x.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(softmax_lastdim(xd), xd.softmax(-1)));
  auto xg = x.clone().requires_grad_(true), xr = x.clone().requires_grad_(true);
  auto dy = torch::randn(x.sizes());
  auto g = torch::autograd::grad({softmax_lastdim(xg)}, {xg}, {dy})[0];
  auto r = torch::autograd::grad({xr.softmax(-1)}, {xr}, {dy})[0];
  EXPECT_TRUE(torch::equal(g, r));
}

TEST(Softmax, Bf16StaysBf16UnderAutocastAndIsTheSameWithoutIt) {
  auto x = score_cases()[4];
  auto plain = softmax_lastdim(x);
  torch::Tensor under;
  {
    AutocastBf16 guard(true);
    under = softmax_lastdim(x);
  }
  ASSERT_EQ(under.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(under, plain));
}

TEST(Softmax, ResultsDoNotDependOnTheThreadCount) {
  const int threads = at::get_num_threads();
  torch::manual_seed(7);
  auto x = (torch::randn({8, 12, 197}) * 8).to(torch::kBFloat16);
  auto dy = torch::randn(x.sizes()).to(torch::kBFloat16);
  auto run = [&](int t) {
    at::set_num_threads(t);
    auto xg = x.clone().requires_grad_(true);
    auto y = softmax_lastdim(xg);
    auto dx = torch::autograd::grad({y}, {xg}, {dy})[0];
    return std::make_pair(y, dx);
  };
  auto one = run(1), two = run(2);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.first, two.first));
  EXPECT_TRUE(torch::equal(one.second, two.second));
}

TEST(Softmax, RowKernelsMatchTheOpOnOneRow) {
  auto x = score_cases()[4][1][2].contiguous();  // one row of 197
  const int64_t n = x.size(0);
  std::vector<uint16_t> y(n), dx(n);
  auto xp = reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>());
  softmax_kernel::forward(xp, y.data(), n);
  auto op = softmax_lastdim(x);
  auto opp = reinterpret_cast<const uint16_t*>(op.data_ptr<at::BFloat16>());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], opp[i]) << "at " << i;
  // The backward of one row against the op's backward of the same row.
  torch::manual_seed(8);
  auto dyt = torch::randn({n}).to(torch::kBFloat16);
  auto xg = x.clone().requires_grad_(true);
  auto dxt = torch::autograd::grad({softmax_lastdim(xg)}, {xg}, {dyt})[0];
  softmax_kernel::backward(y.data(), reinterpret_cast<const uint16_t*>(dyt.data_ptr<at::BFloat16>()),
                           dx.data(), n);
  auto dxp = reinterpret_cast<const uint16_t*>(dxt.data_ptr<at::BFloat16>());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dx[i], dxp[i]) << "at " << i;
}
