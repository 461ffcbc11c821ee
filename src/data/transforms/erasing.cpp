// Random erasing (data/transforms/transforms.hpp), as timm's RandomErasing
// with mode "pixel", count 1 and its default area and aspect ranges.
#include <algorithm>
#include <cmath>

#include "data/transforms/transforms.hpp"
#include "util/hash.hpp"

namespace vitkd {
namespace {

constexpr double kMinArea = 0.02, kMaxArea = 1.0 / 3.0;  // fractions of the view
constexpr double kMinAspect = 0.3;                       // and 1 / 0.3
constexpr int kTries = 10;

uint64_t erase_key(const AugmentSpec& aug, int64_t epoch) {
  return hash64(aug.seed, 0x45524153ULL /* "ERAS" */, static_cast<uint64_t>(epoch));
}

}  // namespace

uint64_t erase_noise_key(const AugmentSpec& aug, int64_t epoch) {
  return hash64(aug.seed, 0x4e4f4953ULL /* "NOIS" */, static_cast<uint64_t>(epoch));
}

EraseBox erase_box(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t s) {
  EraseBox e;
  if (!aug.erasing()) return e;
  // Sample bits: r ^ 1 whether it is erased, r ^ (16 + 4t + j) the t-th try (j: area, aspect, top, left).
  const uint64_t r = hash64(erase_key(aug, epoch), static_cast<uint64_t>(index));
  if (to_unit(mix64(r ^ 1)) >= aug.erase_prob) return e;
  const double area = double(s) * double(s);
  const double log_lo = std::log(kMinAspect), log_hi = -std::log(kMinAspect);
  for (int t = 0; t < kTries; ++t) {
    auto u = [&](int j) { return to_unit(mix64(r ^ static_cast<uint64_t>(16 + 4 * t + j))); };
    const double target = (kMinArea + u(0) * (kMaxArea - kMinArea)) * area;
    const double aspect = std::exp(log_lo + u(1) * (log_hi - log_lo));
    const int64_t h = std::llround(std::sqrt(target * aspect));
    const int64_t w = std::llround(std::sqrt(target / aspect));
    if (w < s && h < s) {  // random.randint(0, s - h): a uniform integer in [0, s - h]
      e.top = static_cast<int16_t>(uniform_below(mix64(r ^ static_cast<uint64_t>(16 + 4 * t + 2)), s - h + 1));
      e.left = static_cast<int16_t>(uniform_below(mix64(r ^ static_cast<uint64_t>(16 + 4 * t + 3)), s - w + 1));
      e.height = static_cast<int16_t>(h);
      e.width = static_cast<int16_t>(w);
      return e;
    }
  }
  return e;
}

void apply_erasing(const EraseBox* boxes, const int64_t* indices, uint64_t noise_key, int64_t n, int64_t c, int64_t s,
                   float* out) {
  for (int64_t b = 0; b < n; ++b) {
    const EraseBox e = boxes[b];
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = e.top; y < e.top + e.height; ++y)
        for (int64_t x = e.left; x < e.left + e.width; ++x)
          out[((b * c + ch) * s + y) * s + x] = erase_noise(noise_key, indices[b], ch, y, x);
  }
}

}  // namespace vitkd
