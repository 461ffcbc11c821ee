#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fixtures.hpp"
#include "model/gelu.hpp"
#include "model/precision.hpp"
#include "model/vit.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;
using vitkd::test::Spec;

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

TEST(ViT, ParameterNamesAreTheCheckpointKeys) {
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

TEST(ViT, OutputShapesAndBf16AutocastEndsWithItsScope) {
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  const ModelSpec s = Spec().image(16).channels(3).dim(32).depth(2).heads(4).classes(5).dist_token();
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

TEST(ViT, SampleLogitsDoNotDependOnTheRestOfTheBatch) {
  // A sample's logits do not depend on the other samples in the batch.
  const ModelSpec s = Spec().image(8).dim(16).depth(1).heads(2);
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
    const ModelSpec s = Spec().image(8).patch(2).dim(24).depth(2).heads(3).dist_token(dist);
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

TEST(ViT, LinearLayersComputeAsTorchNnLinearBitForBit) {
  // The layers read their operands through the compute copies
  // (use_compute_weights) and so cannot call their torch::nn::Linear modules;
  // they must still compute what the modules compute, bit for bit, in fp32
  // and under autocast: the numbers vitkd had before the copies. (at::linear
  // adds a [B, T, D] product's bias inside the product and rounds otherwise.)
  const ModelSpec s = Spec().image(16).patch(4).dim(48).depth(1).heads(3);
  torch::manual_seed(4);
  ViT m(s);
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  auto& blk = *m->blocks[0]->as<Block>();
  auto& attn = *blk.attn;
  auto& mlp = *blk.mlp;
  auto x = torch::randn({4, 17, 48});
  auto images = torch::randn({4, 1, 16, 16});
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 autocast" : "fp32");
    if (bf16) VITKD_SKIP_WITHOUT_BF16_MATMUL();  // (after the fp32 checks)
    AutocastBf16 ac(bf16);
    torch::NoGradGuard ng;
    EXPECT_TRUE(torch::equal(attn.out_proj(x), attn.proj->forward(x)));
    EXPECT_TRUE(torch::equal(mlp.forward(x),
                             mlp.fc2->forward(bias_gelu(torch::linear(x, mlp.fc1->weight), mlp.fc1->bias))));
    auto patches = images.reshape({4, 1, 4, 4, 4, 4}).permute({0, 2, 4, 1, 3, 5}).reshape({4, 16, 16});
    EXPECT_TRUE(torch::equal(m->patch_embed->forward(images), m->patch_embed->proj->forward(patches)));
  }
}

TEST(ViT, FoldedAttentionScaleGivesTheSameLogits) {
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  // The frozen teacher keeps the attention scale in its query weights. With
  // head size 16 the scale is 1/4, a power of two: bitwise the same logits,
  // in fp32 and under bf16 autocast. With head size 8 (scale 1/sqrt 8) only
  // up to rounding.
  for (int64_t hd : {16, 8}) {
    const ModelSpec s = Spec().image(8).patch(2).dim(3 * hd).depth(2).heads(3);
    torch::manual_seed(4);
    ViT m(s);
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.05);
    auto x = torch::randn({5, 1, 8, 8});
    auto run = [&](bool bf16) {
      AutocastBf16 ac(bf16);
      return m->forward(x).prediction().to(torch::kFloat32);
    };
    auto ref32 = run(false), ref16 = run(true);
    for (auto& mod : m->modules(false))
      if (auto* a = mod->as<Attention>()) a->fold_scale_into_queries();
    auto f32 = run(false), f16 = run(true);
    if (hd == 16) {
      EXPECT_TRUE(torch::equal(ref32, f32));
      EXPECT_TRUE(torch::equal(ref16, f16));
    } else {
      EXPECT_FALSE(torch::equal(ref32, f32));  // the fold did change the weights
      EXPECT_LT((ref32 - f32).abs().max().item<double>(), 1e-5);
    }
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

// GELU and its derivative in double precision: the reference for vitkd::gelu.
static double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
static double gelu_grad_ref(double x) {
  return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

TEST(Gelu, KernelsMatchDoublePrecisionReference) {
  std::vector<float> x;
  for (double v = -12.0; v <= 12.0; v += 1.0 / 1024) x.push_back(static_cast<float>(v));
  for (float v : {1e-30f, -1e-30f, 0.0f, -0.0f, 80.0f, -80.0f, 1e4f, -1e4f}) x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n), dy(n, 1.0f), dx(n);
  gelu_kernel::forward(x.data(), y.data(), n);
  gelu_kernel::backward(dy.data(), x.data(), dx.data(), n);
  double worst_y = 0, worst_dx = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double scale = std::max(1.0, std::fabs(static_cast<double>(x[i])));
    worst_y = std::max(worst_y, std::fabs(y[i] - gelu_ref(x[i])) / scale);
    worst_dx = std::max(worst_dx, std::fabs(dx[i] - gelu_grad_ref(x[i])) / scale);
  }
  EXPECT_LT(worst_y, 1e-6);
  EXPECT_LT(worst_dx, 1e-6);
  float nan = std::nanf(""), out = 0;
  gelu_kernel::forward(&nan, &out, 1);
  EXPECT_TRUE(std::isnan(out));
}

/// max |u - v| / max(|v|, 1), in double.
static double max_rel_diff(const torch::Tensor& u, const torch::Tensor& v) {
  auto d = (u.to(torch::kFloat64) - v.to(torch::kFloat64)).abs();
  return (d / v.to(torch::kFloat64).abs().clamp_min(1.0)).max().item<double>();
}

/// Unit roundoff of a floating type: half its machine epsilon (2^-24 for
/// fp32, 2^-8 for bf16), the largest relative error of one rounding.
static double unit_roundoff(torch::ScalarType t) {
  return t == torch::kBFloat16 ? std::ldexp(1.0, -8) : t == torch::kFloat32 ? std::ldexp(1.0, -24) : 0.0;
}

/// Largest |u - ref| / (unit_roundoff(dtype) |ref| + 16 * 2^-24 * scale):
/// <= 1 when u is ref rounded once to `dtype` after an fp32 computation whose
/// error is a few fp32 ulps of `scale` (the magnitude of the terms summed).
static double roundings_beyond(const torch::Tensor& u, const torch::Tensor& ref, const torch::Tensor& scale,
                               torch::ScalarType dtype) {
  const auto err = (u.to(torch::kFloat64) - ref).abs();
  const auto bound = unit_roundoff(dtype) * ref.abs() + 16 * std::ldexp(1.0, -24) * scale + 1e-300;
  return (err / bound).max().item<double>();
}

TEST(Gelu, OpMatchesFloat64ReferenceInFp32AndBf16WithGradients) {
  // vitkd::gelu computes in fp32 and rounds once to the input's type, forward
  // and backward. The reference is the exact formula in float64 on the same
  // (already rounded) inputs, and the tolerance follows from the type alone,
  // so the test holds whatever the CPU and whatever LibTorch's own bf16 GELU
  // does on it (on AVX2-only CPUs that is a different computation).
  torch::manual_seed(5);
  auto base = torch::randn({7, 33, 101}) * 3;  // odd sizes: chunk and vector tails
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0), inv_sqrt2pi = 1.0 / std::sqrt(2.0 * M_PI);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto a = base.to(dtype).detach().requires_grad_(true);
    auto y = vitkd::gelu(a);
    ASSERT_EQ(y.scalar_type(), dtype);
    auto g = torch::randn_like(base).to(dtype);
    y.backward(g);
    ASSERT_EQ(a.grad().scalar_type(), dtype);
    const auto x64 = a.detach().to(torch::kFloat64), g64 = g.to(torch::kFloat64);
    const auto cdf = 0.5 * (1.0 + torch::erf(x64 * inv_sqrt2));
    const auto pdf = torch::exp(-0.5 * x64 * x64) * inv_sqrt2pi;
    const auto y_ref = x64 * cdf;
    const auto dx_ref = g64 * (cdf + x64 * pdf);
    EXPECT_LE(roundings_beyond(y, y_ref, x64.abs(), dtype), 1.0) << dtype;
    // The derivative's fp32 terms: 0.5 (1 + erf) is computed near 1 even where
    // the cdf is tiny, so its error is a few ulps of |g| (1 + |x pdf|).
    EXPECT_LE(roundings_beyond(a.grad(), dx_ref, g64.abs() * (1.0 + (x64 * pdf).abs()), dtype), 1.0) << dtype;
    // Without autograd (teacher, evaluation) it is the same function.
    torch::NoGradGuard ng;
    EXPECT_LE(roundings_beyond(vitkd::gelu(a.detach()), y_ref, x64.abs(), dtype), 1.0) << dtype;
    // Non-contiguous input.
    const auto t = a.detach().transpose(0, 2);
    EXPECT_LE(roundings_beyond(vitkd::gelu(t), y_ref.transpose(0, 2), x64.abs().transpose(0, 2), dtype), 1.0)
        << dtype;
  }
}

TEST(Gelu, BiasGeluMatchesTorchWithGradientsForInputAndBias) {
  torch::manual_seed(6);
  // 3 x 301 rows (more than one 256-row block of the bias sum), 700 columns
  // (more than one 512-value chunk); bias fp32 as in the MLP under autocast.
  auto base = torch::randn({3, 301, 700}) * 3;
  auto bias0 = torch::randn({700});
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    auto za = base.to(dtype).detach().requires_grad_(true);
    auto zb = base.to(dtype).detach().requires_grad_(true);
    auto ba = bias0.clone().requires_grad_(true), bb = bias0.clone().requires_grad_(true);
    auto ya = vitkd::bias_gelu(za, ba);
    // Reference: the sum in fp32, then torch's GELU, rounded once to dtype.
    auto yb = torch::gelu(zb.to(torch::kFloat32) + bb).to(dtype);
    ASSERT_EQ(ya.scalar_type(), dtype);
    auto g = torch::randn_like(base).to(dtype);
    ya.backward(g);
    yb.backward(g);
    const double tol = dtype == torch::kFloat32 ? 2e-6 : 1.0 / 128;
    EXPECT_LT(max_rel_diff(ya, yb), tol) << dtype;
    EXPECT_LT(max_rel_diff(za.grad(), zb.grad()), tol) << dtype;
    // The bias gradient sums 903 rows: its error is measured against the sum of
    // the terms' magnitudes (fp32: summation rounding; bf16: our sum adds the
    // fp32 values of dz, before they are rounded to bf16).
    auto dz64 = za.grad().to(torch::kFloat64);
    auto scale = dz64.abs().sum(std::vector<int64_t>{0, 1});
    auto sum_err = [&](const torch::Tensor& db, const torch::Tensor& ref) {
      return ((db.to(torch::kFloat64) - ref.to(torch::kFloat64)).abs() / scale).max().item<double>();
    };
    const double db_tol = dtype == torch::kFloat32 ? 1e-6 : 1e-3;
    EXPECT_LT(sum_err(ba.grad(), dz64.sum(std::vector<int64_t>{0, 1})), db_tol) << dtype;
    EXPECT_LT(sum_err(ba.grad(), bb.grad()), db_tol) << dtype;
    ASSERT_EQ(ba.grad().scalar_type(), torch::kFloat32);
  }
  // The bias gradient is the same bits with 1 and 2 threads (fixed blocks).
  auto run = [&](int threads) {
    const int saved = at::get_num_threads();
    at::set_num_threads(threads);
    auto z = base.to(torch::kBFloat16).detach().requires_grad_(true);
    auto b = bias0.clone().requires_grad_(true);
    vitkd::bias_gelu(z, b).sum().backward();
    at::set_num_threads(saved);
    return b.grad();
  };
  EXPECT_TRUE(torch::equal(run(1), run(2)));
  // Without autograd, and with a bf16 bias (the frozen bf16 teacher).
  torch::NoGradGuard ng;
  auto zb16 = base.to(torch::kBFloat16);
  auto ref = torch::gelu(zb16.to(torch::kFloat32) + bias0.to(torch::kBFloat16).to(torch::kFloat32));
  auto d = (vitkd::bias_gelu(zb16, bias0.to(torch::kBFloat16)).to(torch::kFloat32) - ref).abs();
  EXPECT_LT((d / ref.abs().clamp_min(1.0)).max().item<double>(), 1.0 / 128);
}

// The device path (LibTorch ops; also other dtypes on the CPU) under autocast:
// z is the bf16 output of fc1's product and the bias an fp32 parameter. The
// result must stay bf16 (half the bytes of fp32), as with the CPU kernel.
TEST(Gelu, BiasGeluTensorPathKeepsTheBf16ActivationUnderAutocast) {
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  torch::manual_seed(8);
  auto z = (torch::randn({2, 37, 96}) * 3).to(torch::kBFloat16).requires_grad_(true);
  auto bias = torch::randn({96}).requires_grad_(true);
  torch::Tensor y, yk;
  {
    AutocastBf16 ac(true);
    y = vitkd::bias_gelu_tensor(z, bias);
    yk = vitkd::bias_gelu(z, bias);  // the CPU kernel, for comparison
  }
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(yk.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(y.numel() * y.element_size(), z.numel() * z.element_size());
  // Within bf16 rounding of the fp32 reference (the bias rounded to bf16 once,
  // the sum and the result once each).
  auto ref = torch::gelu(z.detach().to(torch::kFloat32) + bias.detach());
  EXPECT_LT(max_rel_diff(y, ref), 3.0 / 128);
  y.sum().backward();
  EXPECT_EQ(z.grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(bias.grad().scalar_type(), torch::kFloat32);
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

// ---- precision.compute = "auto" (model/precision.hpp) --------------------------

TEST(Precision, TheRuleFollowsCpuFlagsAndOneDnnCap) {
  // Flag sets as /proc/cpuinfo shows them (cpu_bf16_flags() keeps only these).
  EXPECT_TRUE(bf16_is_native("avx512_bf16", ""));                  // Zen 4/5 EPYC, Cooper Lake
  EXPECT_TRUE(bf16_is_native("avx512_bf16 amx_bf16", ""));         // Sapphire Rapids and later
  EXPECT_TRUE(bf16_is_native("amx_bf16", ""));
  EXPECT_FALSE(bf16_is_native("none", ""));                        // AVX2-only, Skylake/Cascade Lake
  EXPECT_FALSE(bf16_is_native("unknown", ""));                     // no /proc/cpuinfo
  EXPECT_FALSE(bf16_is_native("", ""));
  // oneDNN capped below bf16 (jobs/lanes/avx2.sh): not native, in any spelling.
  for (const char* cap : {"AVX2", "avx2", "AVX512_CORE", "avx512_core_vnni", "SSE41"})
    EXPECT_FALSE(bf16_is_native("avx512_bf16 amx_bf16", cap)) << cap;
  for (const char* cap : {"AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL", "DEFAULT"})
    EXPECT_TRUE(bf16_is_native("avx512_bf16 amx_bf16", cap)) << cap;
}

TEST(Precision, AutoFollowsTheRuleWhateverTheProbeMeasures) {
  // The probe's ratio (a busy machine reads anything) never flips "auto":
  // ratios measured with vitkd bench gemm on idle and loaded machines.
  for (double ratio : {0.06, 0.68, 1.0, kBf16Advantage * 0.99, kBf16Advantage, 3.7}) {
    const auto n = decide_precision(Precision::Auto, Precision::Fp32, false, true, ratio, 0.1, "CPU bf16 flags: avx512_bf16");
    EXPECT_EQ(n.compute, Precision::Bf16) << ratio;
    EXPECT_TRUE(n.native_bf16);
    EXPECT_NE(n.why.find("auto: CPU bf16 flags: avx512_bf16, native bf16"), std::string::npos) << n.why;
    const auto e = decide_precision(Precision::Auto, Precision::Fp32, false, false, ratio, 0.1, "CPU bf16 flags: none");
    EXPECT_EQ(e.compute, Precision::Fp32) << ratio;
    EXPECT_FALSE(e.bf16());
    EXPECT_NE(e.why.find("no native bf16"), std::string::npos) << e.why;
  }
  // Only a bf16 product that fails (probe ran, ratio 0) means fp32 on a native CPU.
  const auto fails = decide_precision(Precision::Auto, Precision::Fp32, false, true, 0, 0.1, "CPU bf16 flags: avx512_bf16");
  EXPECT_EQ(fails.compute, Precision::Fp32);
  EXPECT_NE(fails.why.find("fail"), std::string::npos) << fails.why;
  EXPECT_EQ(precision_warning(fails), "");
  // "auto" warns only where the measurement contradicts the rule.
  EXPECT_EQ(precision_warning(decide_precision(Precision::Auto, Precision::Fp32, false, true, 2.1, 0.1, "")), "");
  EXPECT_EQ(precision_warning(decide_precision(Precision::Auto, Precision::Fp32, false, false, 0.68, 0.1, "")), "");
  const std::string slow = precision_warning(decide_precision(Precision::Auto, Precision::Fp32, false, true, 0.8, 0.1, ""));
  EXPECT_NE(slow.find("0.80x"), std::string::npos) << slow;
  const std::string fast = precision_warning(decide_precision(Precision::Auto, Precision::Fp32, false, false, 2.5, 0.1, ""));
  EXPECT_NE(fast.find("2.50x"), std::string::npos) << fast;
  // A GPU is bf16 without a probe.
  EXPECT_EQ(decide_precision(Precision::Auto, Precision::Fp32, true, false, 0, 0, "").compute, Precision::Bf16);
}

TEST(Precision, ExplicitChoicesAreKeptAndSlowBf16WarnsWithTheRatio) {
  const auto slow = decide_precision(Precision::Bf16, Precision::Fp32, false, false, 0.06, 0.1, "CPU bf16 flags: none");
  EXPECT_EQ(slow.compute, Precision::Bf16);
  const std::string w = precision_warning(slow);
  EXPECT_NE(w.find("0.06x"), std::string::npos) << w;
  EXPECT_EQ(std::count(w.begin(), w.end(), '\n'), 0) << "one line";
  // bf16 that LibTorch cannot run at all here (restricted oneDNN): said so.
  EXPECT_NE(precision_warning(decide_precision(Precision::Bf16, Precision::Fp32, false, false, 0, 0.1, "")).find("cannot"),
            std::string::npos);
  EXPECT_EQ(precision_warning(decide_precision(Precision::Bf16, Precision::Fp32, false, true, 3.7, 0.1, "")), "");
  EXPECT_EQ(precision_warning(decide_precision(Precision::Bf16, Precision::Fp32, true, false, 0, 0, "")), "");  // GPU
  const auto fp32 = decide_precision(Precision::Fp32, Precision::Bf16, false, true, 0, 0, "");
  EXPECT_EQ(fp32.compute, Precision::Fp32);
  EXPECT_EQ(fp32.reduce, Precision::Bf16);  // an explicit reduce type is kept
  // reduce = "auto" follows the compute precision chosen.
  EXPECT_EQ(decide_precision(Precision::Auto, Precision::Auto, false, false, 3.7, 0.1, "").reduce, Precision::Fp32);
  EXPECT_EQ(decide_precision(Precision::Auto, Precision::Auto, false, true, 0.9, 0.1, "").reduce, Precision::Bf16);
}

TEST(Precision, ProbeIsTimeBoxedAndAgreesWithItsRule) {
  // Well under a second on any CPU, bf16 fast, emulated or unavailable.
  double seconds = 0;
  std::string error;
  const double ratio = probe_bf16_over_fp32(0.2, &seconds, &error);
  EXPECT_LT(seconds, 0.6) << "ratio " << ratio;
  EXPECT_GE(ratio, 0.0);
  if (ratio == 0) {
    EXPECT_FALSE(error.empty());
  }
  const auto p = choose_precision(Precision::Auto, Precision::Fp32, torch::kCPU);
  EXPECT_LT(p.probe_seconds, 0.6);
  EXPECT_EQ(p.bf16(), bf16_is_native(cpu_bf16_flags(), onednn_isa_cap()) && p.bf16_over_fp32 > 0) << p.why;
  // fp32 asks for no probe at all.
  const auto f = choose_precision(Precision::Fp32, Precision::Fp32, torch::kCPU);
  EXPECT_EQ(f.probe_seconds, 0.0);
  EXPECT_EQ(f.bf16_over_fp32, 0.0);
}

// The CPU in the MFU ceiling's key (train/setup.cpp): one word (the kept
// file's keys end at whitespace), naming vendor, family, model and the bf16
// flags, so that one host name booted on two CPUs keeps two ceilings.
TEST(Precision, CpuIdentityIsOneWordNamingTheCpuAndItsBf16Flags) {
  const std::string id = cpu_identity();
  EXPECT_EQ(id.find_first_of(" \t\n"), std::string::npos) << id;
  std::string flags = cpu_bf16_flags();
  for (char& c : flags)
    if (c == ' ') c = '+';
  ASSERT_GE(id.size(), flags.size() + 1);
  EXPECT_EQ(id.substr(id.size() - flags.size() - 1), "-" + flags) << id;
#ifdef __linux__
  EXPECT_EQ(id.find("unknown-"), std::string::npos) << id;
  EXPECT_EQ(id.find("-f?"), std::string::npos) << id;
  EXPECT_EQ(id.find("-m?"), std::string::npos) << id;
#endif
}
