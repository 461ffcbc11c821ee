#include "data/augment.hpp"

#include <Kokkos_Core.hpp>

#include "util/hash.hpp"

namespace vitkd {

void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  Kokkos::View<const uint8_t****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> src(
      pixels, n, h, w, c);
  Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> dst(out, n, c, h, w);
  Kokkos::View<const int64_t*, Kokkos::HostSpace, Unmanaged> idx(indices, n);
  // Per-channel scale and shift: (p/255 - mean) / std = p * scale + shift.
  Kokkos::View<float*, Kokkos::HostSpace> scale("Data::scale", c), shift("Data::shift", c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale(ch) = static_cast<float>(1.0 / (255.0 * std[ch]));
    shift(ch) = static_cast<float>(-mean[ch] / std[ch]);
  }
  const bool on = aug.enabled;
  const int64_t pad = aug.pad;
  const bool flip = aug.flip;
  const uint64_t key = hash64(aug.seed, 0x41554721ULL /* "AUG!" */, static_cast<uint64_t>(epoch));
  Kokkos::parallel_for(
      "Data::normalize_augment", Kokkos::RangePolicy<Host>(0, n), KOKKOS_LAMBDA(const int64_t b) {
        int64_t dy = 0, dx = 0;
        bool mirror = false;
        if (on) {
          const uint64_t r = hash64(key, static_cast<uint64_t>(idx(b)));
          const uint64_t span = static_cast<uint64_t>(2 * pad + 1);
          dy = static_cast<int64_t>(uniform_below(mix64(r ^ 1), span)) - pad;
          dx = static_cast<int64_t>(uniform_below(mix64(r ^ 2), span)) - pad;
          mirror = flip && (mix64(r ^ 3) & 1);
        }
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

}  // namespace vitkd
