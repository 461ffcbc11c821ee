// Where a view's box lies (data/transforms/transforms.hpp): the padded
// random crop, the random-resized crop and the evaluation view.
#include <algorithm>
#include <cmath>

#include "data/transforms/transforms.hpp"
#include "util/hash.hpp"

namespace vitkd {
namespace {

// The per-(seed, epoch) key of view_params(); a sample's choices hash it with its index.
uint64_t view_key(const AugmentSpec& aug, int64_t epoch) {
  return hash64(aug.seed, 0x41554721ULL /* "AUG!" */, static_cast<uint64_t>(epoch));
}

constexpr int kResizedTries = 10;  // torchvision's RandomResizedCrop.get_params

int64_t round_half_away(double v) { return static_cast<int64_t>(std::llround(v)); }

ViewParams params_from_key(const AugmentSpec& aug, uint64_t key, int64_t index, int64_t h, int64_t w) {
  if (!aug.enabled) {
    if (aug.out <= 0) return ViewParams{0, 0, static_cast<int16_t>(h), static_cast<int16_t>(w), 0};
    return eval_box(aug.crop_pct, h, w, aug.out);
  }
  // Sample bits: r ^ 1, 2 the pad crop's shifts, r ^ 3 the flip, r ^ (16 + 4t + j) the t-th try of the
  // random-resized crop (j: area, ratio, top, left).
  const uint64_t r = hash64(key, static_cast<uint64_t>(index));
  ViewParams v;
  if (aug.crop == CropKind::Pad) {
    v.height = static_cast<int16_t>(h);
    v.width = static_cast<int16_t>(w);
    const uint64_t span = static_cast<uint64_t>(2 * aug.pad + 1);
    v.top = static_cast<int16_t>(static_cast<int64_t>(uniform_below(mix64(r ^ 1), span)) - aug.pad);
    v.left = static_cast<int16_t>(static_cast<int64_t>(uniform_below(mix64(r ^ 2), span)) - aug.pad);
  } else {
    double u[4][kResizedTries];
    for (int t = 0; t < kResizedTries; ++t)
      for (int j = 0; j < 4; ++j) u[j][t] = to_unit(mix64(r ^ static_cast<uint64_t>(16 + 4 * t + j)));
    v = random_resized_box(aug, h, w, u[0], u[1], u[2], u[3]);
  }
  v.flip = aug.flip && (mix64(r ^ 3) & 1) ? 1 : 0;
  return v;
}

}  // namespace

ViewParams random_resized_box(const AugmentSpec& aug, int64_t h, int64_t w, const double* u_area,
                              const double* u_ratio, const double* u_top, const double* u_left) {
  const double area = double(h) * double(w);
  const double log_lo = std::log(aug.ratio_min), log_hi = std::log(aug.ratio_max);
  ViewParams v;
  for (int t = 0; t < kResizedTries; ++t) {
    const double target = area * (aug.scale_min + u_area[t] * (aug.scale_max - aug.scale_min));
    const double aspect = std::exp(log_lo + u_ratio[t] * (log_hi - log_lo));
    const int64_t bw = round_half_away(std::sqrt(target * aspect));
    const int64_t bh = round_half_away(std::sqrt(target / aspect));
    if (bw > 0 && bw <= w && bh > 0 && bh <= h) {
      // torch.randint(0, h - bh + 1): a uniform integer in [0, h - bh].
      v.top = static_cast<int16_t>(std::min<int64_t>(h - bh, static_cast<int64_t>(u_top[t] * double(h - bh + 1))));
      v.left = static_cast<int16_t>(std::min<int64_t>(w - bw, static_cast<int64_t>(u_left[t] * double(w - bw + 1))));
      v.height = static_cast<int16_t>(bh);
      v.width = static_cast<int16_t>(bw);
      return v;
    }
  }
  // The fallback: the centred box of the whole image, its aspect clamped to the range.
  int64_t bw = w, bh = h;
  const double in_ratio = double(w) / double(h);
  if (in_ratio < aug.ratio_min) {
    bh = std::max<int64_t>(1, std::min(h, round_half_away(double(bw) / aug.ratio_min)));
  } else if (in_ratio > aug.ratio_max) {
    bw = std::max<int64_t>(1, std::min(w, round_half_away(double(bh) * aug.ratio_max)));
  }
  v.top = static_cast<int16_t>((h - bh) / 2);
  v.left = static_cast<int16_t>((w - bw) / 2);
  v.height = static_cast<int16_t>(bh);
  v.width = static_cast<int16_t>(bw);
  return v;
}

ViewParams eval_box(double crop_pct, int64_t h, int64_t w, int64_t s) {
  ViewParams v;
  if (h == s && w == s) {  // stored at the output size: the whole image
    v.height = static_cast<int16_t>(h);
    v.width = static_cast<int16_t>(w);
    return v;
  }
  // Resize the shorter side to floor(s / crop_pct), then crop s x s at the
  // centre: in stored pixels, the centred square of side s * shorter / that.
  const int64_t shorter = std::min(h, w);
  const double scale_size = std::floor(double(s) / crop_pct);
  const int64_t side = std::clamp<int64_t>(round_half_away(double(s) * double(shorter) / scale_size), 1, shorter);
  v.top = static_cast<int16_t>((h - side) / 2);
  v.left = static_cast<int16_t>((w - side) / 2);
  v.height = v.width = static_cast<int16_t>(side);
  return v;
}

ViewParams view_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t h, int64_t w) {
  return params_from_key(aug, view_key(aug, epoch), index, h, w);
}

void view_params(const AugmentSpec& aug, int64_t epoch, const int64_t* indices, int64_t n, int64_t h,
                 int64_t w, ViewParams* out) {
  const uint64_t key = view_key(aug, epoch);
  for (int64_t b = 0; b < n; ++b) out[b] = params_from_key(aug, key, indices[b], h, w);
}

}  // namespace vitkd
