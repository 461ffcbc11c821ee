// Mixup, CutMix and random erasing (data/transforms): the partners, the
// weights and boxes against timm's formulas, the mixed images and labels
// against their definition, the Beta sampler against its distribution, and
// the loss on mixed labels against the loss on labels.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "data/loader.hpp"
#include "data/transforms/transforms.hpp"
#include "distill/loss.hpp"

using namespace vitkd;

namespace {

AugmentSpec mixing_spec(double mixup, double cutmix, double erase = 0) {
  AugmentSpec a;
  a.enabled = true;
  a.crop = CropKind::RandomResized;
  a.out = 24;
  a.seed = 11;
  a.mix.mixup_alpha = mixup;
  a.mix.cutmix_alpha = cutmix;
  a.erase_prob = erase;
  return a;
}

std::vector<uint8_t> noise_pixels(int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> px(static_cast<size_t>(n * h * w * c));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  return px;
}

// The Kolmogorov-Smirnov distance of sorted samples `v` from the CDF `cdf`.
template <class F> double ks_distance(std::vector<double> v, F cdf) {
  std::sort(v.begin(), v.end());
  double d = 0;
  const double n = static_cast<double>(v.size());
  for (size_t i = 0; i < v.size(); ++i) d = std::max({d, std::abs(cdf(v[i]) - i / n), std::abs(cdf(v[i]) - (i + 1) / n)});
  return d;
}

}  // namespace

// Beta(a, a) from the keyed stream has Beta's distribution: at a = 1 the
// uniform, at a = 0.5 the arcsine law (CDF 2/pi asin(sqrt(x))), tested with
// Kolmogorov-Smirnov at n = 20000 (the 1 % critical distance is 0.0115); at
// a = 0.8 (DeiT's Mixup) the mean 1/2 and variance 1 / (4 (2a + 1)).
TEST(Mixing, BetaSamplesHaveBetasDistribution) {
  const int n = 20000;
  auto draw = [&](double a) {
    std::vector<double> v(n);
    for (int i = 0; i < n; ++i) v[i] = beta_symmetric(a, mix64(1000003ULL * i + 17));
    return v;
  };
  EXPECT_LT(ks_distance(draw(1.0), [](double x) { return x; }), 0.0115);
  EXPECT_LT(ks_distance(draw(0.5), [](double x) { return 2.0 / M_PI * std::asin(std::sqrt(x)); }), 0.0115);
  const std::vector<double> v = draw(0.8);
  double mean = 0, var = 0;
  for (double x : v) mean += x / n;
  for (double x : v) var += (x - mean) * (x - mean) / (n - 1);
  EXPECT_NEAR(mean, 0.5, 0.006);
  EXPECT_NEAR(var, 1.0 / (4 * 2.6), 0.004);
}

// Partners pair the split up: partner(partner(i)) == i, nobody is their own
// partner but the one left over when n is odd, the pairing is a pure function
// of (seed, epoch, index) and changes with the epoch.
TEST(Mixing, PartnersPairTheSplitPerEpoch) {
  for (const int64_t n : {1000, 1001}) {
    MixPairing p(5, n), q(5, n);
    int64_t alone = 0, same_next_epoch = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = p.partner(3, i);
      ASSERT_GE(j, 0);
      ASSERT_LT(j, n);
      EXPECT_EQ(p.partner(3, j), i);
      alone += j == i;
      EXPECT_EQ(q.partners(3, {i})[0], j);  // another instance, asked in another order
      same_next_epoch += MixPairing(5, n).partner(4, i) == j;
    }
    EXPECT_EQ(alone, n % 2);
    EXPECT_LT(same_next_epoch, n / 50);
  }
}

// The pairs are neighbours in the loader's sample order: with an even batch
// per rank, every full global batch gives each rank both samples of each of
// its pairs, at 1, 2 and 3 ranks, so the loader reads no partner.
TEST(Mixing, PartnersLieInTheRanksBatchForEvenBatchSizes) {
  const int64_t n = 997;
  const uint64_t seed = 42;
  for (const int world : {1, 2, 3})
    for (const int64_t batch : {2, 6, 16}) {
      MixPairing pairing(seed, n);
      const std::vector<int64_t> perm = epoch_permutation(n, seed, 5);
      const int64_t g = batch * world;
      for (int64_t step = 0; (step + 1) * g <= n; ++step)
        for (int r = 0; r < world; ++r) {
          const std::vector<int64_t> mine = rank_slice(perm, step, g, r, world);
          const std::set<int64_t> have(mine.begin(), mine.end());
          for (const int64_t j : pairing.partners(5, mine)) ASSERT_TRUE(have.count(j)) << world << " " << batch;
        }
    }
}

// The per-sample choices follow timm's Mixup (mode "elem", correct_lam):
// mixup_prob, the switch between the kinds, and CutMix's box, a square of
// side int(S sqrt(1 - lam0)) centred on a pixel and clipped, whose area gives lam.
TEST(Mixing, ParamsFollowTimmsRules) {
  const int64_t S = 24, n = 20000;
  AugmentSpec a = mixing_spec(0.8, 1.0);
  a.mix.prob = 0.7;
  a.mix.switch_prob = 0.25;
  int64_t none = 0, cut = 0;
  double lam_mixup = 0;
  for (int64_t i = 0; i < n; ++i) {
    const MixParams m = mix_params(a, 2, i, i + 1, S);
    EXPECT_EQ(m.partner, i + 1);
    if (m.kind == MixKind::None) {
      ++none;
      EXPECT_EQ(m.lam, 1.0f);
    } else if (m.kind == MixKind::CutMix) {
      ++cut;
      ASSERT_TRUE(0 <= m.y0 && m.y0 <= m.y1 && m.y1 <= S && 0 <= m.x0 && m.x0 <= m.x1 && m.x1 <= S);
      EXPECT_EQ(m.lam, static_cast<float>(1.0 - double((m.y1 - m.y0) * (m.x1 - m.x0)) / double(S * S)));
    } else {
      lam_mixup += m.lam;
    }
    EXPECT_EQ(mix_params(a, 2, i, i + 1, S).lam, m.lam);  // pure
  }
  EXPECT_NEAR(double(none) / n, 0.3, 0.015);
  EXPECT_NEAR(double(cut) / (n - none), 0.25, 0.015);
  EXPECT_NEAR(lam_mixup / double(n - none - cut), 0.5, 0.01);
  // An unclipped box: side int(24 * sqrt(1 - lam0)) even, centred, lam exact.
  for (int64_t i = 0; i < 2000; ++i) {
    const MixParams m = mix_params(mixing_spec(0, 1.0), 0, i, i + 1, S);
    if (m.y0 > 0 && m.x0 > 0 && m.y1 < S && m.x1 < S) {
      EXPECT_EQ(m.y1 - m.y0, m.x1 - m.x0);
      EXPECT_EQ((m.y1 - m.y0) % 2, 0);
    }
  }
  // Not mixed: partner == index, or mixing off.
  EXPECT_EQ(mix_params(a, 2, 9, 9, S).kind, MixKind::None);
  a.enabled = false;
  EXPECT_EQ(mix_params(a, 2, 9, 10, S).kind, MixKind::None);
}

// The mixed batch is its definition: Mixup lam * view(i) + (1 - lam) *
// view(partner) within float rounding; CutMix the partner's view inside the
// box and the sample's own outside, bit for bit; with erasing, each view as it
// is erased in its own sample; labels lam and 1 - lam exactly, rows summing to
// 1. Partners in the batch (mixed from the batch's own views) and partners
// read beside it (their views rendered) give the same bits.
TEST(Mixing, MixedImagesAndLabelsAreTheirDefinition) {
  const int64_t n = 64, H = 30, W = 36, C = 3, S = 24, K = 5;
  const std::vector<uint8_t> px = noise_pixels(n, H, W, C);
  const std::vector<double> mean(C, 0.4), stdv(C, 0.25);
  std::vector<int64_t> idx(n), pidx(n), inside(n), outside(n, -1);
  std::vector<int32_t> lab(n), plab(n);
  std::vector<uint8_t> ppx(px.size());
  for (int64_t b = 0; b < n; ++b) {
    idx[b] = 100 + 3 * b;
    lab[b] = static_cast<int32_t>((b * 7 + b / 3) % K);
  }
  for (int64_t b = 0; b < n; ++b) {  // pairs (2k, 2k+1), as the loader's order gives them
    const int64_t q = b ^ 1;
    pidx[b] = idx[q];
    plab[b] = lab[q];
    inside[b] = q;
    std::copy(px.begin() + q * H * W * C, px.begin() + (q + 1) * H * W * C, ppx.begin() + b * H * W * C);
  }
  for (const double erase : {0.0, 0.5}) {
    const AugmentSpec a = mixing_spec(0.8, 1.0, erase);
    ImageBatch ib;
    ib.n = n, ib.h = H, ib.w = W, ib.c = C, ib.epoch = 4;
    ib.pixels = px.data(), ib.indices = idx.data(), ib.labels = lab.data();
    ib.partner_indices = pidx.data(), ib.partner_labels = plab.data();
    std::vector<float> x(n * C * S * S), y(n * K), x_read(x.size()), y_read(y.size());
    ib.partner_pos = inside.data();
    transform_batch(ib, a, mean, stdv, nullptr, nullptr, K, x.data(), y.data());
    ib.partner_pos = outside.data();
    ib.partner_pixels = ppx.data();
    transform_batch(ib, a, mean, stdv, nullptr, nullptr, K, x_read.data(), y_read.data());
    EXPECT_EQ(x, x_read) << "partners in the batch and partners read beside it differ";
    EXPECT_EQ(y, y_read);
    // Each view alone (mixing off, erasing as configured).
    AugmentSpec single = a;
    single.mix = MixSpec{};
    std::vector<float> own(x.size());
    normalize_augment(px.data(), idx.data(), n, H, W, C, mean, stdv, single, 4, own.data());
    int64_t kinds[3] = {0, 0, 0}, erased = 0;
    for (int64_t b = 0; b < n; ++b) {
      const MixParams m = mix_params(a, 4, idx[b], pidx[b], S);
      ++kinds[static_cast<int>(m.kind)];
      erased += erase_box(a, 4, pidx[b], S).height > 0;
      const int64_t q = b ^ 1;
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t yy = 0; yy < S; ++yy)
          for (int64_t xx = 0; xx < S; ++xx) {
            const int64_t at = ((b * C + ch) * S + yy) * S + xx, other = ((q * C + ch) * S + yy) * S + xx;
            if (m.kind == MixKind::Mixup) {
              ASSERT_NEAR(x[at], m.lam * own[at] + (1 - m.lam) * own[other], 1e-5f);
            } else {
              const bool in_box = m.kind == MixKind::CutMix && yy >= m.y0 && yy < m.y1 && xx >= m.x0 && xx < m.x1;
              ASSERT_EQ(x[at], in_box ? own[other] : own[at]) << b << " " << yy << " " << xx;
            }
          }
      float sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float want = (k == lab[b] ? m.lam : 0.f) + (k == plab[b] ? 1.0f - m.lam : 0.f);
        EXPECT_EQ(y[b * K + k], want);
        sum += y[b * K + k];
      }
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
    }
    EXPECT_GT(kinds[1], 10);  // both kinds occur
    EXPECT_GT(kinds[2], 10);
    if (erase > 0) {
      EXPECT_GT(erased, 10);
    }
  }
}

// Random erasing as timm's RandomErasing: probability, one box of 2-33 % of
// the view (up to rounding) with aspect in [0.3, 1/0.3], strictly inside; the
// erased pixels are standard normal noise, the others untouched.
TEST(Erasing, BoxesAndNoiseFollowTimmsRules) {
  const int64_t S = 224, n = 20000;
  const AugmentSpec a = mixing_spec(0, 0, 0.25);
  int64_t on = 0;
  for (int64_t i = 0; i < n; ++i) {
    const EraseBox e = erase_box(a, 1, i, S);
    EXPECT_EQ(erase_box(a, 1, i, S), e);
    if (e.height == 0) continue;
    ++on;
    ASSERT_TRUE(e.top >= 0 && e.left >= 0 && e.top + e.height <= S && e.left + e.width <= S);
    ASSERT_LT(e.height, S);
    ASSERT_LT(e.width, S);
    const double frac = double(e.height) * e.width / double(S * S), aspect = double(e.height) / e.width;
    ASSERT_GE(frac, 0.02 * 0.9);
    ASSERT_LE(frac, 1.0 / 3.0 * 1.1);
    ASSERT_GE(aspect, 0.3 * 0.9);
    ASSERT_LE(aspect, 1 / 0.3 * 1.1);
  }
  EXPECT_NEAR(double(on) / n, 0.25, 0.012);
  double s1 = 0, s2 = 0;
  const int m = 100000;
  for (int k = 0; k < m; ++k) {
    const double z = erase_noise(erase_noise_key(a, 1), k % 97, k % 3, k / 300, k % 100);
    s1 += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s1 / m, 0.0, 0.01);
  EXPECT_NEAR(s2 / m, 1.0, 0.02);
  // In a batch: erased pixels are the noise, the rest the unerased view.
  const int64_t H = 28, W = 28, C = 2, s = 20, b = 32;
  const std::vector<uint8_t> px = noise_pixels(b, H, W, C);
  std::vector<int64_t> idx(b);
  for (int64_t i = 0; i < b; ++i) idx[i] = i * 13;
  AugmentSpec e = a;
  e.out = s;
  e.erase_prob = 0.9;
  AugmentSpec plain = e;
  plain.erase_prob = 0;
  std::vector<float> with(b * C * s * s), without(with.size());
  normalize_augment(px.data(), idx.data(), b, H, W, C, {0.5, 0.5}, {0.2, 0.2}, e, 3, with.data());
  normalize_augment(px.data(), idx.data(), b, H, W, C, {0.5, 0.5}, {0.2, 0.2}, plain, 3, without.data());
  int64_t erased = 0;
  for (int64_t i = 0; i < b; ++i) {
    const EraseBox box = erase_box(e, 3, idx[i], s);
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t yy = 0; yy < s; ++yy)
        for (int64_t xx = 0; xx < s; ++xx) {
          const int64_t at = ((i * C + ch) * s + yy) * s + xx;
          const bool in = yy >= box.top && yy < box.top + box.height && xx >= box.left && xx < box.left + box.width;
          erased += in;
          ASSERT_EQ(with[at], in ? erase_noise(erase_noise_key(e, 3), idx[i], ch, yy, xx) : without[at]);
        }
  }
  EXPECT_GT(erased, 0);
}

// The loss on mixed labels is the loss on labels for one-hot rows (with label
// smoothing too), and for a mixed row the lam-weighted sum of the two losses.
TEST(Mixing, SoftLabelLossMatchesTheLabelLoss) {
  torch::manual_seed(3);
  const auto logits = torch::randn({6, 5});
  const auto labels = torch::tensor({0, 4, 2, 2, 1, 3}, torch::kLong);
  const auto partner = torch::tensor({1, 1, 0, 2, 4, 3}, torch::kLong);
  const auto onehot = torch::one_hot(labels, 5).to(torch::kFloat32);
  for (const double e : {0.0, 0.1}) {
    EXPECT_TRUE(torch::allclose(cross_entropy_per_sample(logits, onehot, e), cross_entropy_per_sample(logits, labels, e),
                                1e-6, 1e-6));
    const auto lam = torch::tensor({0.3, 0.9, 0.5, 0.1, 1.0, 0.0}).unsqueeze(1);
    const auto mixed = lam * onehot + (1 - lam) * torch::one_hot(partner, 5).to(torch::kFloat32);
    const auto want = lam.squeeze(1) * cross_entropy_per_sample(logits, labels, e) +
                      (1 - lam.squeeze(1)) * cross_entropy_per_sample(logits, partner, e);
    EXPECT_TRUE(torch::allclose(cross_entropy_per_sample(logits, mixed, e), want, 1e-5, 1e-6));
  }
}
