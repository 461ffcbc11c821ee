#include "data/transforms/transforms.hpp"

#include <Kokkos_Core.hpp>

namespace vitkd {

void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out, int64_t s) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  // Output rows x columns: S x S, or the stored size when s = 0.
  const int64_t oh = s > 0 ? s : h, ow = s > 0 ? s : w;
  Kokkos::View<const uint8_t****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> src(
      pixels, n, h, w, c);
  Kokkos::View<float****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> dst(out, n, c, oh, ow);
  Kokkos::View<const ViewParams*, Kokkos::HostSpace, Unmanaged> vp(views, n);
  // Per-channel scale and shift: (p/255 - mean) / std = p * scale + shift.
  Kokkos::View<float*, Kokkos::HostSpace> scale("Data::scale", c), shift("Data::shift", c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale(ch) = static_cast<float>(1.0 / (255.0 * std[ch]));
    shift(ch) = static_cast<float>(-mean[ch] / std[ch]);
  }
  // Bilinear taps per view and output row/column, as PyTorch's
  // interpolate(mode="bilinear", align_corners=False, antialias=False) takes
  // them: source coordinate (o + 0.5) * box / S - 0.5, clamped at 0, between
  // pixels i0 and i1 = min(i0 + 1, box - 1) with weight l on i1. The columns
  // are stored in output order after the mirror, so a flip costs nothing.
  Kokkos::View<int32_t**, Kokkos::HostSpace> y0("Data::tap_y0", n, oh), y1("Data::tap_y1", n, oh),
      x0("Data::tap_x0", n, ow), x1("Data::tap_x1", n, ow);
  Kokkos::View<float**, Kokkos::HostSpace> ly("Data::tap_ly", n, oh), lx("Data::tap_lx", n, ow);
  auto taps = [](int64_t first, int64_t box, int64_t size, int64_t o, int32_t& i0, int32_t& i1, float& l) {
    const float ratio = static_cast<float>(box) / static_cast<float>(size);
    float src_f = ratio * (static_cast<float>(o) + 0.5f) - 0.5f;
    if (src_f < 0.f) src_f = 0.f;
    const int64_t i = static_cast<int64_t>(src_f);
    const int64_t step = i < box - 1 ? 1 : 0;
    i0 = static_cast<int32_t>(first + i);
    i1 = static_cast<int32_t>(first + i + step);
    l = src_f - static_cast<float>(i);
  };
  for (int64_t b = 0; b < n; ++b) {
    const ViewParams v = views[b];
    if (v.height == oh && v.width == ow) continue;  // the copy path below
    for (int64_t o = 0; o < oh; ++o) taps(v.top, v.height, oh, o, y0(b, o), y1(b, o), ly(b, o));
    for (int64_t o = 0; o < ow; ++o)
      taps(v.left, v.width, ow, v.flip ? ow - 1 - o : o, x0(b, o), x1(b, o), lx(b, o));
  }
  Kokkos::parallel_for(
      "Data::normalize_augment", Kokkos::RangePolicy<Host>(0, n), KOKKOS_LAMBDA(const int64_t b) {
        const ViewParams v = vp(b);
        const bool mirror = v.flip != 0;
        if (v.height == oh && v.width == ow) {
          // A box of the output's size: a shifted copy, zero outside the image.
          const int64_t dy = v.top, dx = v.left;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t y = 0; y < oh; ++y) {
              const int64_t sy = y + dy;
              for (int64_t x = 0; x < ow; ++x) {
                const int64_t xx = mirror ? ow - 1 - x : x;
                const int64_t sx = xx + dx;
                const float p = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? float(src(b, sy, sx, ch)) : 0.f;
                dst(b, ch, y, x) = p * scale(ch) + shift(ch);
              }
            }
          return;
        }
        // A box inside the image, resampled to the output size.
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t r0 = y0(b, y), r1 = y1(b, y);
          const float l1y = ly(b, y), l0y = 1.f - l1y;
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t c0 = x0(b, x), c1 = x1(b, x);
            const float l1x = lx(b, x), l0x = 1.f - l1x;
            for (int64_t ch = 0; ch < c; ++ch) {
              const float p = l0y * (l0x * float(src(b, r0, c0, ch)) + l1x * float(src(b, r0, c1, ch))) +
                              l1y * (l0x * float(src(b, r1, c0, ch)) + l1x * float(src(b, r1, c1, ch)));
              dst(b, ch, y, x) = p * scale(ch) + shift(ch);
            }
          }
        }
      });
  Kokkos::fence();
}

}  // namespace vitkd
