// Mixup and CutMix (data/transforms/transforms.hpp), as timm's Mixup in mode
// "elem" with correct_lam: every sample draws whether it is mixed, which kind,
// and lam ~ Beta(a, a), all keyed by (seed, epoch, sample index).
#include <algorithm>
#include <cmath>

#include "data/loader.hpp"
#include "data/transforms/transforms.hpp"
#include "util/hash.hpp"

namespace vitkd {
namespace {

// A uniform double in (0, 1) and a standard normal from the stream (key, *ctr).
double open_unit(uint64_t key, uint64_t& ctr) {
  return (static_cast<double>(hash64(key, ctr++) >> 11) + 0.5) * 0x1.0p-53;
}
double normal(uint64_t key, uint64_t& ctr) {
  const double u1 = open_unit(key, ctr), u2 = open_unit(key, ctr);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Gamma(a, 1): Marsaglia and Tsang (2000); for a < 1 the boost Gamma(a + 1) * U^(1/a).
double gamma_sample(double a, uint64_t key, uint64_t& ctr) {
  if (a < 1.0) {
    const double g = gamma_sample(a + 1.0, key, ctr);
    return g * std::pow(open_unit(key, ctr), 1.0 / a);
  }
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(key, ctr);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = open_unit(key, ctr);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

uint64_t mix_key(const AugmentSpec& aug, int64_t epoch) {
  return hash64(aug.seed, 0x4d495821ULL /* "MIX!" */, static_cast<uint64_t>(epoch));
}

}  // namespace

double beta_symmetric(double a, uint64_t key) {
  uint64_t ctr = 0;
  const double x = gamma_sample(a, key, ctr), y = gamma_sample(a, key, ctr);
  return x + y > 0.0 ? x / (x + y) : 0.5;
}

void MixPairing::build(int64_t epoch) {
  perm_ = epoch_permutation(n_, seed_, epoch);  // the loader's sample order
  pos_.assign(static_cast<size_t>(n_), 0);
  for (int64_t k = 0; k < n_; ++k) pos_[perm_[k]] = k;
  epoch_ = epoch;
}

int64_t MixPairing::partner(int64_t epoch, int64_t index) {
  if (epoch != epoch_) build(epoch);
  const int64_t q = pos_[index] ^ 1;
  return q < n_ ? perm_[q] : index;
}

std::vector<int64_t> MixPairing::partners(int64_t epoch, const std::vector<int64_t>& indices) {
  std::vector<int64_t> out(indices.size());
  for (size_t j = 0; j < indices.size(); ++j) out[j] = partner(epoch, indices[j]);
  return out;
}

MixParams mix_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t partner, int64_t s) {
  MixParams m;
  m.partner = partner;
  if (!aug.mixing() || partner == index) return m;
  // Sample bits: r ^ 1 whether it is mixed, r ^ 2 the kind, r ^ 3 lam's stream, r ^ 4, 5 the box's centre.
  const uint64_t r = hash64(mix_key(aug, epoch), static_cast<uint64_t>(index));
  if (to_unit(mix64(r ^ 1)) >= aug.mix.prob) return m;
  const MixSpec& ms = aug.mix;
  const bool cutmix = ms.mixup_alpha > 0 && ms.cutmix_alpha > 0 ? to_unit(mix64(r ^ 2)) < ms.switch_prob
                                                                 : ms.cutmix_alpha > 0;
  const double lam = beta_symmetric(cutmix ? ms.cutmix_alpha : ms.mixup_alpha, mix64(r ^ 3));
  if (!cutmix) {
    m.kind = MixKind::Mixup;
    m.lam = static_cast<float>(lam);
    return m;
  }
  const double cut = std::sqrt(1.0 - lam);
  const int64_t side = static_cast<int64_t>(double(s) * cut);  // int() truncates
  const int64_t cy = static_cast<int64_t>(uniform_below(mix64(r ^ 4), s));
  const int64_t cx = static_cast<int64_t>(uniform_below(mix64(r ^ 5), s));
  auto clip = [&](int64_t v) { return std::clamp<int64_t>(v, 0, s); };
  m.kind = MixKind::CutMix;
  m.y0 = static_cast<int16_t>(clip(cy - side / 2));
  m.y1 = static_cast<int16_t>(clip(cy + side / 2));
  m.x0 = static_cast<int16_t>(clip(cx - side / 2));
  m.x1 = static_cast<int16_t>(clip(cx + side / 2));
  const int64_t box = int64_t(m.y1 - m.y0) * int64_t(m.x1 - m.x0);
  m.lam = static_cast<float>(1.0 - double(box) / (double(s) * double(s)));
  return m;
}

}  // namespace vitkd
