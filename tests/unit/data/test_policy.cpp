// The augmentation policy (data/transforms/policy.cpp): TrivialAugmentWide's
// op table and draws, the geometric ops against the pixel maps they mean,
// and the colour ops against float64 references of torchvision's formulas
// on uint8 images, within one grey level. The references were checked
// against torchvision 0.29.2 (transforms.v2.functional: rotate, affine,
// adjust_*, posterize, solarize, autocontrast, equalize) on 2026-12-02: equal,
// or within one grey level where torchvision truncates a blend.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "data/transforms/transforms.hpp"

using namespace vitkd;

namespace {

AugmentSpec policy_spec() {
  AugmentSpec a;
  a.enabled = true;
  a.crop = CropKind::RandomResized;
  a.out = 16;
  a.seed = 3;
  a.trivial_augment = true;
  return a;
}

// A view [C, s, s] in grey levels as uint8, with the normalization of mean 0.5, std 0.25.
struct GreyView {
  int64_t c, s;
  std::vector<uint8_t> q;
  std::vector<double> mean, stdv;
  GreyView(int64_t c_, int64_t s_) : c(c_), s(s_), q(c_ * s_ * s_), mean(c_, 0.5), stdv(c_, 0.25) {
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(40 + (i * 2654435761u >> 7) % 150);
  }
  std::vector<float> normalized() const {
    std::vector<float> v(q.size());
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < s * s; ++i)
        v[ch * s * s + i] = static_cast<float>((q[ch * s * s + i] / 255.0 - mean[ch]) / stdv[ch]);
    return v;
  }
  // The op's result in grey levels.
  std::vector<double> apply(PolicyOpKind op, float magnitude) const {
    std::vector<float> v = normalized();
    apply_colour_op(PolicyOp{op, magnitude}, c, s, mean, stdv, v.data());
    std::vector<double> g(v.size());
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < s * s; ++i) g[ch * s * s + i] = (v[ch * s * s + i] * stdv[ch] + mean[ch]) * 255.0;
    return g;
  }
};

double worst(const std::vector<double>& got, const std::vector<double>& want) {
  double w = 0;
  for (size_t i = 0; i < got.size(); ++i) w = std::max(w, std::abs(got[i] - want[i]));
  return w;
}

}  // namespace

// torchvision's TrivialAugmentWide table at 31 bins: shear and enhancements
// linspace(0, 0.99), translation linspace(0, 32) pixels, rotation
// linspace(0, 135) degrees, posterize 8 - round(bin / 5) bits, solarize
// linspace(255, 0).
TEST(Policy, MagnitudesAreTorchvisionsTable) {
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::ShearX, 30), 0.99f);
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::Sharpness, 10), 0.33f);
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::TranslateY, 15), 16.0f);
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::Rotate, 20), 90.0f);
  EXPECT_EQ(policy_magnitude(PolicyOpKind::Posterize, 0), 8.0f);
  EXPECT_EQ(policy_magnitude(PolicyOpKind::Posterize, 12), 6.0f);
  EXPECT_EQ(policy_magnitude(PolicyOpKind::Posterize, 30), 2.0f);
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::Solarize, 0), 255.0f);
  EXPECT_FLOAT_EQ(policy_magnitude(PolicyOpKind::Solarize, 30), 0.0f);
  EXPECT_EQ(policy_magnitude(PolicyOpKind::Equalize, 17), 0.0f);
}

// Each view draws one of the 14 ops uniformly, a bin uniformly and, for the
// signed ops, a sign with probability 1/2; a pure function of (seed, epoch,
// index); identity without the policy.
TEST(Policy, DrawsAreUniformAndKeyed) {
  const AugmentSpec a = policy_spec();
  const int n = 28000;
  std::array<int, kPolicyOps> count{};
  int negative = 0, signed_ops = 0;
  for (int i = 0; i < n; ++i) {
    const PolicyOp p = policy_op(a, 2, i);
    ++count[static_cast<int>(p.op)];
    EXPECT_EQ(policy_op(a, 2, i).magnitude, p.magnitude);
    if (p.op == PolicyOpKind::Rotate || p.op == PolicyOpKind::Brightness) {
      ++signed_ops;
      negative += p.magnitude < 0;
    }
    if (p.op == PolicyOpKind::Posterize) {
      EXPECT_TRUE(p.magnitude >= 2 && p.magnitude <= 8);
    }
  }
  for (int k = 0; k < kPolicyOps; ++k) EXPECT_NEAR(count[k], n / kPolicyOps, 150) << policy_op_name(PolicyOpKind(k));
  EXPECT_NEAR(double(negative) / signed_ops, 0.5, 0.04);
  AugmentSpec off = a;
  off.trivial_augment = false;
  EXPECT_EQ(policy_op(off, 2, 5).op, PolicyOpKind::Identity);
}

// The geometric ops move the view's pixels as torchvision's F.affine and
// F.rotate do (nearest, fill 0): TranslateX by t shifts right by trunc(t);
// Rotate by 90 turns the view counter-clockwise; ShearX by m takes row y
// from column x + m (y + 1/2) (F.affine's shear about the top-left corner).
TEST(Policy, GeometricOpsMoveThePixelsAsTorchvision) {
  const int64_t S = 16, C = 2;
  std::vector<uint8_t> px(S * S * C);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(1 + (i * 37) % 250);
  const std::vector<double> mean(C, 0.0), stdv(C, 1.0);
  const ViewParams whole{0, 0, static_cast<int16_t>(S), static_cast<int16_t>(S), 0};
  auto render = [&](const PolicyOp& op) {
    std::vector<float> m(6), out(C * S * S);
    policy_affine(op, S, m.data());
    const uint8_t geometric = 1;
    RenderPass p;
    p.pixels = px.data();
    p.views = &whole;
    p.affine = m.data();
    p.geometric = &geometric;
    render_views(p, 1, S, S, C, mean, stdv, S, out.data());
    return out;
  };
  auto in = [&](int64_t ch, int64_t y, int64_t x) { return float(px[(y * S + x) * C + ch]) / 255.0f; };
  auto at = [&](const std::vector<float>& v, int64_t ch, int64_t y, int64_t x) { return v[(ch * S + y) * S + x]; };
  const std::vector<float> right = render({PolicyOpKind::TranslateX, 5.7f}), up = render({PolicyOpKind::TranslateY, -3.2f});
  const std::vector<float> turned = render({PolicyOpKind::Rotate, 90.0f}), sheared = render({PolicyOpKind::ShearX, 0.33f});
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t y = 0; y < S; ++y)
      for (int64_t x = 0; x < S; ++x) {
        EXPECT_FLOAT_EQ(at(right, ch, y, x), x >= 5 ? in(ch, y, x - 5) : 0.0f);
        EXPECT_FLOAT_EQ(at(up, ch, y, x), y + 3 < S ? in(ch, y + 3, x) : 0.0f);
        EXPECT_FLOAT_EQ(at(turned, ch, y, x), in(ch, x, S - 1 - y));
        const double xs = std::nearbyint(x + 0.33 * (y + 0.5));
        EXPECT_FLOAT_EQ(at(sheared, ch, y, x), xs < S ? in(ch, y, int64_t(xs)) : 0.0f) << y << " " << x;
      }
}

// The colour ops against float64 references of torchvision's uint8 ops
// (functional.adjust_* with factor 1 + m, posterize, solarize,
// autocontrast, equalize), within one grey level.
TEST(Policy, ColourOpsEqualTorchvisionsFormulas) {
  // One grey level, plus the float round trip through the normalization.
  const double kOneGrey = 1.0 + 1e-3;
  const GreyView v(3, 12);
  const int64_t P = v.s * v.s;
  auto ref = [&](auto pixel) {
    std::vector<double> r(v.q.size());
    for (int64_t ch = 0; ch < v.c; ++ch)
      for (int64_t i = 0; i < P; ++i) r[ch * P + i] = pixel(ch, i);
    return r;
  };
  auto q = [&](int64_t ch, int64_t i) { return double(v.q[ch * P + i]); };
  auto grey = [&](int64_t i) { return std::floor(0.2989 * q(0, i) + 0.587 * q(1, i) + 0.114 * q(2, i)); };
  auto blend = [](double a, double b, double f) { return std::trunc(std::clamp(f * a + (1 - f) * b, 0.0, 255.0)); };
  for (const float m : {-0.7f, 0.45f}) {
    const double f = 1.0 + m;
    EXPECT_LE(worst(v.apply(PolicyOpKind::Brightness, m), ref([&](int64_t ch, int64_t i) { return blend(q(ch, i), 0, f); })), kOneGrey);
    EXPECT_LE(worst(v.apply(PolicyOpKind::Color, m), ref([&](int64_t ch, int64_t i) { return blend(q(ch, i), grey(i), f); })), kOneGrey);
    double mean = 0;
    for (int64_t i = 0; i < P; ++i) mean += grey(i) / P;
    EXPECT_LE(worst(v.apply(PolicyOpKind::Contrast, m), ref([&](int64_t ch, int64_t i) { return blend(q(ch, i), mean, f); })), kOneGrey);
    const auto sharp = ref([&](int64_t ch, int64_t i) {
      const int64_t y = i / v.s, x = i % v.s;
      if (y == 0 || x == 0 || y == v.s - 1 || x == v.s - 1) return q(ch, i);  // borders kept
      double acc = 0;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) acc += (dy == 0 && dx == 0 ? 5.0 : 1.0) * q(ch, i + dy * v.s + dx);
      return blend(q(ch, i), std::nearbyint(acc / 13.0), f);
    });
    EXPECT_LE(worst(v.apply(PolicyOpKind::Sharpness, m), sharp), kOneGrey);
  }
  EXPECT_LE(worst(v.apply(PolicyOpKind::Posterize, 3), ref([&](int64_t ch, int64_t i) { return double(int(q(ch, i)) & 0xe0); })), 1e-3);
  EXPECT_LE(worst(v.apply(PolicyOpKind::Solarize, 119), ref([&](int64_t ch, int64_t i) { return q(ch, i) >= 119 ? 255 - q(ch, i) : q(ch, i); })), 1e-3);
  std::vector<double> ac(v.q.size());
  for (int64_t ch = 0; ch < v.c; ++ch) {
    double lo = 255, hi = 0;
    for (int64_t i = 0; i < P; ++i) lo = std::min(lo, q(ch, i)), hi = std::max(hi, q(ch, i));
    for (int64_t i = 0; i < P; ++i) ac[ch * P + i] = std::trunc((q(ch, i) - lo) * 255.0 / (hi - lo));
  }
  EXPECT_LE(worst(v.apply(PolicyOpKind::AutoContrast, 0), ac), kOneGrey);
  // Equalize: PIL's lookup table, lut[v] = (cdf(v - 1) + step / 2) / step with
  // step = (pixels - count of the largest value) / 255 (a 32 x 32 view, so
  // that step > 0; a 12 x 12 one has step 0 and is left as it is).
  for (const int64_t side : {12, 32}) {
    const GreyView e(3, side);
    const int64_t Q = side * side;
    std::vector<double> eq(e.q.size());
    int64_t steps = 0;
    for (int64_t ch = 0; ch < e.c; ++ch) {
      std::vector<int64_t> hist(256, 0);
      for (int64_t i = 0; i < Q; ++i) ++hist[e.q[ch * Q + i]];
      int last = 255;
      while (hist[last] == 0) --last;
      const int64_t step = (Q - hist[last]) / 255;
      steps += step;
      for (int64_t i = 0; i < Q; ++i) {
        int64_t below = 0;
        for (int u = 0; u < e.q[ch * Q + i]; ++u) below += hist[u];
        eq[ch * Q + i] = step == 0 ? double(e.q[ch * Q + i]) : std::min<int64_t>(255, (below + step / 2) / step);
      }
    }
    EXPECT_EQ(steps > 0, side == 32);
    EXPECT_LE(worst(e.apply(PolicyOpKind::Equalize, 0), eq), 1e-3);
  }
  // Identity and the geometric ops leave the rendered view as it is.
  EXPECT_EQ(v.apply(PolicyOpKind::Identity, 0), v.apply(PolicyOpKind::Rotate, 30));
}
