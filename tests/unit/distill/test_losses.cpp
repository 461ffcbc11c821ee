// Loss values against numbers computed by hand (see the comments).
#include <gtest/gtest.h>

#include "distill/loss.hpp"

using namespace vitkd;

namespace {
// Student logits s = [1, 2, 3], teacher logits t = [3, 2, 1], label y = 2.
// softmax(s) = e^s / (e + e^2 + e^3); log softmax(s) = s - 3 - log(1 + e^-1 + e^-2)
//            = [-2.40760596, -1.40760596, -0.40760596]; log softmax(t) is the reverse.
ViTOutput student() {
  ViTOutput o;
  o.logits = torch::tensor({{1.0f, 2.0f, 3.0f}});
  return o;
}
torch::Tensor teacher() { return torch::tensor({{3.0f, 2.0f, 1.0f}}); }
torch::Tensor label() { return torch::tensor({2}, torch::kLong); }
}  // namespace

TEST(Losses, CrossEntropyMatchesHandComputation) {
  // CE = log(1 + e^-1 + e^-2) = log(1.50321472) = 0.40760596
  EXPECT_NEAR(cross_entropy_per_sample(student().logits, label()).item<double>(), 0.40760596, 1e-6);
}

TEST(Losses, LabelSmoothingMatchesHandComputationAndPyTorch) {
  // e = 0.1, K = 3: 0.9 * CE + 0.1 * mean_k(-log p_k)
  //   = 0.9 * 0.40760596 + 0.1 * (2.40760596 + 1.40760596 + 0.40760596) / 3 = 0.50760596
  EXPECT_NEAR(cross_entropy_per_sample(student().logits, label(), 0.1).item<double>(), 0.50760596, 1e-6);
  // And LibTorch's own label_smoothing on random logits, per sample.
  torch::manual_seed(2);
  auto z = torch::randn({16, 10}) * 3;
  auto y = torch::randint(0, 10, {16}, torch::kLong);
  auto ref = torch::nn::functional::cross_entropy(
      z, y, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.2).reduction(torch::kNone));
  EXPECT_LT((cross_entropy_per_sample(z, y, 0.2) - ref).abs().max().item<double>(), 1e-5);
  // The distillation loss's label term smooths too; e = 0 is plain CE.
  DistillSpec spec;
  spec.alpha = 0.0;
  spec.label_smoothing = 0.1;
  EXPECT_NEAR(distill_loss_per_sample(student(), teacher(), label(), spec).item<double>(), 0.50760596, 1e-6);
  EXPECT_NEAR(cross_entropy_per_sample(student().logits, label(), 0.0).item<double>(), 0.40760596, 1e-6);
}

TEST(Losses, KlMatchesHandComputation) {
  // tau = 1: p_t = [0.66524096, 0.24472847, 0.09003057]; log p_t - log p_s = [2, 0, -2]
  //   KL = 2 * 0.66524096 - 2 * 0.09003057 = 1.15042078
  EXPECT_NEAR(kl_per_sample(student().logits, teacher(), 1.0).item<double>(), 1.15042078, 1e-6);
  // tau = 2: p_t = softmax([1.5, 1, 0.5]) = [0.50648039, 0.30719589, 0.18632372];
  //   log ratio = [1, 0, -1]; KL = 0.50648039 - 0.18632372 = 0.32015667
  EXPECT_NEAR(kl_per_sample(student().logits, teacher(), 2.0).item<double>(), 0.32015667, 1e-6);
}

TEST(Losses, SoftDistillationMatchesHandComputation) {
  DistillSpec d;
  d.alpha = 0.5;
  d.temperature = 1.0;
  // 0.5 * 0.40760596 + 0.5 * 1 * 1.15042078 = 0.77901337
  EXPECT_NEAR(distill_loss_per_sample(student(), teacher(), label(), d).item<double>(), 0.77901337, 1e-6);
  d.temperature = 2.0;
  // 0.5 * 0.40760596 + 0.5 * 4 * 0.32015667 = 0.84411632
  EXPECT_NEAR(distill_loss_per_sample(student(), teacher(), label(), d).item<double>(), 0.84411632, 1e-6);
  d.alpha = 0.0;  // pure cross-entropy
  EXPECT_NEAR(distill_loss_per_sample(student(), teacher(), label(), d).item<double>(), 0.40760596, 1e-6);
}

TEST(Losses, HardDistillationMatchesHandComputation) {
  DistillSpec d;
  d.hard = true;
  // teacher argmax = 0; CE(s, 0) = 2.40760596; 0.5 * 0.40760596 + 0.5 * 2.40760596 = 1.40760596
  EXPECT_NEAR(distill_loss_per_sample(student(), teacher(), label(), d).item<double>(), 1.40760596, 1e-6);
}

TEST(Losses, DistTokenUsesTheDistillationHead) {
  ViTOutput o = student();
  o.dist_logits = torch::tensor({{3.0f, 2.0f, 1.0f}});  // agrees with the teacher
  DistillSpec d;
  d.hard = true;
  // CE(cls, y=2) = 0.40760596 and CE(dist, argmax t = 0) = 0.40760596
  EXPECT_NEAR(distill_loss_per_sample(o, teacher(), label(), d).item<double>(), 0.40760596, 1e-6);
  // Prediction is the mean of both heads: [2, 2, 2]
  EXPECT_TRUE(torch::allclose(o.prediction(), torch::tensor({{2.0f, 2.0f, 2.0f}})));
  // Teacher mode trains the prediction: CE([2,2,2], 2) = log 3
  EXPECT_NEAR(teacher_loss_per_sample(o, label()).item<double>(), std::log(3.0), 1e-6);
}

TEST(Losses, OneFloatLossPerSampleAndZeroKlToItself) {
  auto s = torch::randn({5, 7});
  auto t = torch::randn({5, 7});
  auto y = torch::randint(0, 7, {5}, torch::kLong);
  ViTOutput o;
  o.logits = s;
  DistillSpec d;
  auto l = distill_loss_per_sample(o, t, y, d);
  EXPECT_EQ(l.sizes(), torch::IntArrayRef({5}));
  EXPECT_EQ(l.scalar_type(), torch::kFloat32);
  // KL of a distribution with itself is zero.
  EXPECT_NEAR(kl_per_sample(s, s, 3.0).abs().max().item<double>(), 0.0, 1e-6);
}

// A teacher-view cache hands the loss the soft target p = softmax(t/tau)
// instead of t: the loss is then the live teacher's, bit for bit, and
// finite where p underflows to 0 (0 log 0 = 0).
TEST(Losses, SoftTargetsGiveTheLogitLossBitwise) {
  torch::manual_seed(3);
  auto s = torch::randn({32, 10}) * 2;
  auto t = torch::randn({32, 10}) * 4;
  t.index_put_({0, 0}, 900.0f);  // softmax underflows to exactly 0 elsewhere in row 0
  auto y = torch::randint(0, 10, {32}, torch::kLong);
  ViTOutput o;
  o.logits = s;
  for (const double tau : {1.0, 4.0}) {
    DistillSpec d;
    d.temperature = tau;
    const auto live = distill_loss_per_sample(o, t, y, d);
    DistillSpec dp = d;
    dp.teacher_probs = true;
    const auto p = teacher_soft_target(t, tau);
    EXPECT_EQ(p.index({0, 1}).item<float>(), 0.0f);
    const auto cached = distill_loss_per_sample(o, p, y, dp);
    EXPECT_TRUE(torch::equal(live, cached)) << "tau " << tau;
    EXPECT_TRUE(torch::isfinite(cached).all().item<bool>());
    // The KL from p is the KL from the logits (kl_per_sample), to rounding.
    EXPECT_LT((kl_from_probs(s, p, tau) - kl_per_sample(s, t, tau)).abs().max().item<double>(), 1e-4);
    d.hard = dp.hard = true;
    EXPECT_TRUE(torch::equal(distill_loss_per_sample(o, t, y, d), distill_loss_per_sample(o, p, y, dp)));
  }
}
