#include "data/augment.hpp"

#include <Kokkos_Core.hpp>

#include "util/hash.hpp"

namespace vitkd {
namespace {

// The per-(seed, epoch) key of view_params(); a sample's choices hash it with its index.
uint64_t view_key(const AugmentSpec& aug, int64_t epoch) {
  return hash64(aug.seed, 0x41554721ULL /* "AUG!" */, static_cast<uint64_t>(epoch));
}

ViewParams params_from_key(uint64_t key, int64_t index, bool on, int64_t pad,
                           bool flip, int64_t h, int64_t w) {
  ViewParams v;
  v.height = static_cast<int16_t>(h);
  v.width = static_cast<int16_t>(w);
  if (on) {
    const uint64_t r = hash64(key, static_cast<uint64_t>(index));
    const uint64_t span = static_cast<uint64_t>(2 * pad + 1);
    v.top = static_cast<int16_t>(static_cast<int64_t>(uniform_below(mix64(r ^ 1), span)) - pad);
    v.left = static_cast<int16_t>(static_cast<int64_t>(uniform_below(mix64(r ^ 2), span)) - pad);
    v.flip = flip && (mix64(r ^ 3) & 1) ? 1 : 0;
  }
  return v;
}

}  // namespace

ViewParams view_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t h, int64_t w) {
  return params_from_key(view_key(aug, epoch), index, aug.enabled, aug.pad, aug.flip, h, w);
}

void view_params(const AugmentSpec& aug, int64_t epoch, const int64_t* indices, int64_t n, int64_t h,
                 int64_t w, ViewParams* out) {
  const uint64_t key = view_key(aug, epoch);
  for (int64_t b = 0; b < n; ++b)
    out[b] = params_from_key(key, indices[b], aug.enabled, aug.pad, aug.flip, h, w);
}

void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::View<const uint8_t****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> src(
      pixels, n, h, w, c);
  Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> dst(out, n, c, h, w);
  Kokkos::View<const ViewParams*, Kokkos::HostSpace, Unmanaged> vp(views, n);
  // Per-channel scale and shift: (p/255 - mean) / std = p * scale + shift.
  Kokkos::View<float*, Kokkos::HostSpace> scale("Data::scale", c), shift("Data::shift", c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale(ch) = static_cast<float>(1.0 / (255.0 * std[ch]));
    shift(ch) = static_cast<float>(-mean[ch] / std[ch]);
  }
  Kokkos::parallel_for(
      "Data::normalize_augment", Kokkos::RangePolicy<Host>(0, n), KOKKOS_LAMBDA(const int64_t b) {
        const int64_t dy = vp(b).top, dx = vp(b).left;
        const bool mirror = vp(b).flip != 0;
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t y = 0; y < h; ++y) {
            const int64_t sy = y + dy;
            for (int64_t x = 0; x < w; ++x) {
              const int64_t xx = mirror ? w - 1 - x : x;
              const int64_t sx = xx + dx;
              const float p = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? float(src(b, sy, sx, ch)) : 0.f;
              dst(b, ch, y, x) = p * scale(ch) + shift(ch);
            }
          }
      });
  Kokkos::fence();
}

void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out) {
  std::vector<ViewParams> views(static_cast<size_t>(n));
  view_params(aug, epoch, indices, n, h, w, views.data());
  normalize_views(pixels, views.data(), n, h, w, c, mean, std, out);
}

}  // namespace vitkd
