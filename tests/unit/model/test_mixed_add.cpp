// The mixed-dtype adds (model/mixed_add.hpp) against LibTorch's own ops on
// the same operands: values bit for bit, gradients bit for bit (the bias's
// against its fp32 sum), independence of the thread count, and the fp32 and
// non-contiguous cases left to LibTorch.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <vector>

#include "model/mixed_add.hpp"

using namespace vitkd;

namespace {

bool bitwise(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a, b);
}

// [B, T, M] shapes: a partial chunk, more than one chunk (512) per row, one
// row block (256 rows) and more, and ViT-S/16's qkv product.
std::vector<std::vector<int64_t>> shapes() { return {{1, 3, 7}, {2, 5, 1153}, {3, 197, 64}, {2, 197, 1152}}; }

}  // namespace

TEST(MixedAdd, BiasAddIsLibTorchsInPlaceAddBitForBit) {
  torch::manual_seed(3);
  for (const auto& s : shapes()) {
    SCOPED_TRACE("shape [" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + "]");
    auto z = (torch::randn(s) * 4).to(torch::kBFloat16);
    auto b = torch::randn({s[2]});
    auto y = bias_add(z, b);
    auto ref = z.clone();
    ref += b;  // torch::nn::functional::linear's add: fp32 arithmetic, a bf16 result
    EXPECT_TRUE(bitwise(y, ref));
  }
}

TEST(MixedAdd, BiasAddGradientsAreTheOutputGradientAndItsFp32RowSum) {
  torch::manual_seed(4);
  for (const auto& s : shapes()) {
    auto z = (torch::randn(s) * 4).to(torch::kBFloat16).requires_grad_(true);
    auto b = torch::randn({s[2]}).requires_grad_(true);
    auto dy = torch::randn(s).to(torch::kBFloat16);
    bias_add(z, b).backward(dy);
    EXPECT_TRUE(bitwise(z.grad(), dy));
    ASSERT_EQ(b.grad().scalar_type(), torch::kFloat);
    auto ref = dy.to(torch::kDouble).sum(std::vector<int64_t>{0, 1});
    const double rows = static_cast<double>(s[0] * s[1]);
    // fp32 summation: error within rows * 2^-24 of the sum of magnitudes.
    auto bound = dy.to(torch::kDouble).abs().sum(std::vector<int64_t>{0, 1}) * rows * 6e-8 + 1e-30;
    const bool within = ((b.grad().to(torch::kDouble) - ref).abs() <= bound).all().item<bool>();
    EXPECT_TRUE(within);
    // LibTorch's own gradient is that sum rounded to bf16: the two agree within its step.
    auto z2 = z.detach().clone().requires_grad_(true);
    auto b2 = b.detach().clone().requires_grad_(true);
    auto y2 = z2.clone();
    y2 += b2;
    y2.backward(dy);
    EXPECT_TRUE(torch::allclose(b.grad(), b2.grad(), 1.0 / 128, 1e-2));
  }
}

TEST(MixedAdd, ResidualAddIsLibTorchsAddBitForBitGradientsIncluded) {
  torch::manual_seed(5);
  for (const auto& s : shapes()) {
    auto x = torch::randn(s).requires_grad_(true);
    auto a = (torch::randn(s) * 3).to(torch::kBFloat16).requires_grad_(true);
    auto x2 = x.detach().clone().requires_grad_(true);
    auto a2 = a.detach().clone().requires_grad_(true);
    auto y = residual_add(x, a);
    auto ref = x2 + a2;
    ASSERT_EQ(y.scalar_type(), torch::kFloat);
    EXPECT_TRUE(bitwise(y, ref));
    auto dy = torch::randn(s);
    y.backward(dy);
    ref.backward(dy);
    EXPECT_TRUE(bitwise(x.grad(), x2.grad()));
    EXPECT_TRUE(bitwise(a.grad(), a2.grad()));
    ASSERT_EQ(a.grad().scalar_type(), torch::kBFloat16);
  }
}

TEST(MixedAdd, TheBiasGradientDoesNotDependOnTheThreadCount) {
  torch::manual_seed(6);
  auto z = torch::randn({4, 197, 384}).to(torch::kBFloat16).requires_grad_(true);
  auto dy = torch::randn({4, 197, 384}).to(torch::kBFloat16);
  const int before = at::get_num_threads();
  std::vector<torch::Tensor> grads;
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    auto b = torch::randn({384}, torch::TensorOptions().dtype(torch::kFloat)).requires_grad_(true);
    bias_add(z, b).backward(dy);
    grads.push_back(b.grad().clone());
  }
  at::set_num_threads(before);
  EXPECT_TRUE(bitwise(grads[0], grads[1]));
  EXPECT_TRUE(bitwise(grads[0], grads[2]));
}

TEST(MixedAdd, OtherOperandsAreLibTorchsOwnAdds) {
  torch::manual_seed(7);
  auto x = torch::randn({2, 9, 16}), y = torch::randn({2, 9, 16}), b = torch::randn({16});
  // fp32 operands: the plain adds, bit for bit, whatever the kernels do.
  EXPECT_TRUE(bitwise(residual_add(x, y), x + y));
  EXPECT_TRUE(bitwise(bias_add(x, b), x + b));
  // A non-contiguous slice (the last block's head tokens) and a bf16 bias.
  auto a = torch::randn({2, 9, 16}).to(torch::kBFloat16);
  auto xs = x.narrow(1, 0, 2), as = a.narrow(1, 0, 2);
  EXPECT_TRUE(bitwise(residual_add(xs, as), xs + as));
  auto bb = b.to(torch::kBFloat16);
  EXPECT_TRUE(bitwise(bias_add(a, bb), a + bb));
}
