// The one resizer (data/transforms/resize.hpp): prepare's area and bilinear
// taps and its resize + centre crop.
#include "data/transforms/resize.hpp"

#include <algorithm>
#include <cmath>

namespace vitkd {

AxisTaps area_taps(int64_t n, int64_t len, int64_t o) {
  const double scale = double(len) / double(n);  // output pixels per source pixel
  const double a = double(o) / scale, b = double(o + 1) / scale;
  AxisTaps t;
  for (int64_t i = static_cast<int64_t>(std::floor(a)); i < b && i < n; ++i) {
    const double w = std::min(b, double(i + 1)) - std::max(a, double(i));
    if (w > 0) t.emplace_back(i, w / (b - a));
  }
  return t;
}

std::vector<AxisTaps> resize_taps(int64_t n, int64_t len, int64_t off, int64_t out) {
  std::vector<AxisTaps> taps(out);
  for (int64_t o = 0; o < out; ++o) {
    if (len <= n) {
      taps[o] = area_taps(n, len, o + off);
    } else {
      const LinearTap<double> t = bilinear_tap<double>(n, len, o + off);
      taps[o] = {{t.i0, 1.0 - t.l}, {t.i1, t.l}};
    }
  }
  return taps;
}

void resize_centre_crop(const uint8_t* in, int64_t h, int64_t w, int64_t c, int64_t size, uint8_t* out) {
  int64_t H2, W2;  // resized extent: shorter side = size
  if (h <= w) {
    H2 = size;
    W2 = std::max<int64_t>(size, std::llround(double(w) * size / h));
  } else {
    W2 = size;
    H2 = std::max<int64_t>(size, std::llround(double(h) * size / w));
  }
  const auto ty = resize_taps(h, H2, (H2 - size) / 2, size);
  const auto tx = resize_taps(w, W2, (W2 - size) / 2, size);
  std::vector<double> acc(c);
  for (int64_t y = 0; y < size; ++y)
    for (int64_t x = 0; x < size; ++x) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (const auto& [iy, wy] : ty[y])
        for (const auto& [ix, wx] : tx[x]) {
          const uint8_t* p = in + (iy * w + ix) * c;
          for (int64_t ch = 0; ch < c; ++ch) acc[ch] += wy * wx * p[ch];
        }
      for (int64_t ch = 0; ch < c; ++ch)
        out[(y * size + x) * c + ch] = static_cast<uint8_t>(std::clamp(std::lround(acc[ch]), 0L, 255L));
    }
}

}  // namespace vitkd
