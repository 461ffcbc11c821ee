// The batch kernel of the transforms (data/transforms/transforms.hpp): views
// resampled (through a geometric op of the policy where one is drawn) and
// normalized; and the mixing of rendered views.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "data/transforms/resize.hpp"
#include "data/transforms/transforms.hpp"

namespace vitkd {

namespace {

// What the kernel stores for a view pixel of value `px` (0..255, fractional
// where resampled) in a channel of scale `k` and shift `d`: the normalized
// value px * k + d (float), or px rounded half up to the nearest grey level
// (uint8, normalized later by normalization_table()).
template <typename Out>
KOKKOS_INLINE_FUNCTION Out pixel_out(float px, float k, float d);
template <>
KOKKOS_INLINE_FUNCTION float pixel_out<float>(float px, float k, float d) {
  return px * k + d;
}
template <>
KOKKOS_INLINE_FUNCTION uint8_t pixel_out<uint8_t>(float px, float, float) {
  const float r = px + 0.5f;
  return static_cast<uint8_t>(r < 0.f ? 0.f : (r > 255.f ? 255.f : r));
}

// One view resampled from its sample's pixels `img` [H, W, C] (W = `w`)
// into `out` [C, OH, OW] (pixel_out()), through the taps of its rows (`ty0`,
// `ty1`, weight `tly` on ty1; OH of each) and columns (`tx0`, `tx1`, `tlx`;
// OW of each). Separable: every source row the view reads resampled along x
// once (the inner sums of render_views' value()), then pairs of such rows
// blended along y over contiguous memory. The same operations in the same
// order as value(), so the same bits; the rows between the first and the
// last that no output reads (a box taller than the output) are skipped.
template <typename Out>
void render_separable(const uint8_t* img, int64_t w, int64_t c, const int32_t* ty0, const int32_t* ty1,
                      const float* tly, int64_t oh, const int32_t* tx0, const int32_t* tx1, const float* tlx,
                      int64_t ow, const float* scale, const float* shift, Out* out) {
  const int64_t first = ty0[0], rows = ty1[oh - 1] - first + 1, stride = c * ow;
  thread_local std::vector<float> across;  // [rows, C, OW]: per thread, reused
  thread_local std::vector<uint8_t> used;
  across.resize(static_cast<size_t>(rows * stride));
  used.assign(static_cast<size_t>(rows), 0);
  for (int64_t y = 0; y < oh; ++y) used[ty0[y] - first] = used[ty1[y] - first] = 1;
  for (int64_t r = 0; r < rows; ++r) {
    if (!used[r]) continue;
    const uint8_t* line = img + (first + r) * w * c;
    float* row = across.data() + r * stride;
    for (int64_t x = 0; x < ow; ++x) {
      const int64_t c0 = tx0[x], c1 = tx1[x];
      const float l1x = tlx[x], l0x = 1.f - l1x;
      for (int64_t ch = 0; ch < c; ++ch)
        row[ch * ow + x] = l0x * float(line[c0 * c + ch]) + l1x * float(line[c1 * c + ch]);
    }
  }
  for (int64_t y = 0; y < oh; ++y) {
    const float l1y = tly[y], l0y = 1.f - l1y;
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* top = across.data() + (ty0[y] - first) * stride + ch * ow;
      const float* bottom = across.data() + (ty1[y] - first) * stride + ch * ow;
      const float k = scale[ch], d = shift[ch];
      Out* o = out + (ch * oh + y) * ow;
      for (int64_t x = 0; x < ow; ++x) o[x] = pixel_out<Out>(l0y * top[x] + l1y * bottom[x], k, d);
    }
  }
}

// render_views() into float (normalized) or uint8 (grey levels) outputs.
template <typename Out>
void render_views_as(const RenderPass& p, int64_t n, int64_t h, int64_t w, int64_t c,
                     const std::vector<double>& mean, const std::vector<double>& std, int64_t s, Out* out) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  // Output rows x columns: S x S, or the stored size when s = 0.
  const int64_t oh = s > 0 ? s : h, ow = s > 0 ? s : w;
  Kokkos::View<const uint8_t****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> src(p.pixels, n, h, w, c);
  Kokkos::View<Out****, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> dst(out, n, c, oh, ow);
  const ViewParams* views = p.views;
  // Per-channel scale and shift: (p/255 - mean) / std = p * scale + shift.
  Kokkos::View<float*, Kokkos::HostSpace> scale("Data::scale", c), shift("Data::shift", c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale(ch) = static_cast<float>(1.0 / (255.0 * std[ch]));
    shift(ch) = static_cast<float>(-mean[ch] / std[ch]);
  }
  // Bilinear taps per view and output row/column, in float, from the one
  // resizer (data/transforms/resize.hpp: bilinear_tap(), as PyTorch's
  // interpolate(mode="bilinear", align_corners=False, antialias=False) takes
  // them), offset to the box's first row or column. The columns are stored
  // in output order after the mirror, so a flip costs nothing.
  Kokkos::View<int32_t**, Kokkos::HostSpace> y0("Data::tap_y0", n, oh), y1("Data::tap_y1", n, oh),
      x0("Data::tap_x0", n, ow), x1("Data::tap_x1", n, ow);
  Kokkos::View<float**, Kokkos::HostSpace> ly("Data::tap_ly", n, oh), lx("Data::tap_lx", n, ow);
  auto taps = [](int64_t first, int64_t box, int64_t size, int64_t o, int32_t& i0, int32_t& i1, float& l) {
    const LinearTap<float> t = bilinear_tap<float>(box, size, o);
    i0 = static_cast<int32_t>(first + t.i0);
    i1 = static_cast<int32_t>(first + t.i1);
    l = t.l;
  };
  for (int64_t b = 0; b < n; ++b) {
    const ViewParams v = views[b];
    if (v.height == oh && v.width == ow) continue;  // the copy path below
    for (int64_t o = 0; o < oh; ++o) taps(v.top, v.height, oh, o, y0(b, o), y1(b, o), ly(b, o));
    for (int64_t o = 0; o < ow; ++o)
      taps(v.left, v.width, ow, v.flip ? ow - 1 - o : o, x0(b, o), x1(b, o), lx(b, o));
  }
  const RenderPass pass = p;
  auto body = KOKKOS_LAMBDA(const int64_t b) {
        const ViewParams v = views[b];
        const bool copy = v.height == oh && v.width == ow;
        const bool mirror = v.flip != 0;
        // The view's pixel at view row y, column x, channel ch (pixel_out()).
        auto value = [&](int64_t y, int64_t x, int64_t ch) {
          float px;
          if (copy) {  // a box of the output's size: a shifted copy, zero outside the image
            const int64_t sy = y + v.top, sx = (mirror ? ow - 1 - x : x) + v.left;
            px = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? float(src(b, sy, sx, ch)) : 0.f;
          } else {  // a box inside the image, resampled
            const int64_t r0 = y0(b, y), r1 = y1(b, y), c0 = x0(b, x), c1 = x1(b, x);
            const float l1y = ly(b, y), l0y = 1.f - l1y, l1x = lx(b, x), l0x = 1.f - l1x;
            px = l0y * (l0x * float(src(b, r0, c0, ch)) + l1x * float(src(b, r0, c1, ch))) +
                 l1y * (l0x * float(src(b, r1, c0, ch)) + l1x * float(src(b, r1, c1, ch)));
          }
          return pixel_out<Out>(px, scale(ch), shift(ch));
        };
        if (!(pass.geometric && pass.geometric[b])) {
          // The common view, with the taps hoisted out of the inner loops (the
          // same arithmetic as value(), so the same bits).
          if (copy) {
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t y = 0; y < oh; ++y)
                for (int64_t x = 0; x < ow; ++x) dst(b, ch, y, x) = value(y, x, ch);
            return;
          }
          render_separable(&src(b, 0, 0, 0), w, c, &y0(b, 0), &y1(b, 0), &ly(b, 0), oh, &x0(b, 0), &x1(b, 0),
                           &lx(b, 0), ow, scale.data(), shift.data(), &dst(b, 0, 0, 0));
          return;
        }
        // A geometric op: the nearest view pixel of the inverse map (as
        // grid_sample(mode="nearest", align_corners=False): round half to even).
        const float* m = pass.affine + 6 * b;
        const float hw = 0.5f * float(ow), hh = 0.5f * float(oh);
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            const float xc = float(x) + 0.5f - hw, yc = float(y) + 0.5f - hh;
            // Round half to even by adding and taking away 1.5 x 2^23 (exact for
            // |v| < 2^22, far beyond any view; nearbyint() would be a libm call).
            const float xs = (m[0] * xc + m[1] * yc + m[2] + hw - 0.5f + 12582912.0f) - 12582912.0f;
            const float ys = (m[3] * xc + m[4] * yc + m[5] + hh - 0.5f + 12582912.0f) - 12582912.0f;
            const bool inside = xs >= 0.f && xs < float(ow) && ys >= 0.f && ys < float(oh);
            if (!inside || copy) {
              for (int64_t ch = 0; ch < c; ++ch)
                dst(b, ch, y, x) = inside ? value(int64_t(ys), int64_t(xs), ch) : pixel_out<Out>(0.f, scale(ch), shift(ch));
              continue;
            }
            // value() with its taps read once for all channels (the same bits).
            const int64_t vy = int64_t(ys), vx = int64_t(xs);
            const int64_t r0 = y0(b, vy), r1 = y1(b, vy), c0 = x0(b, vx), c1 = x1(b, vx);
            const float l1y = ly(b, vy), l0y = 1.f - l1y, l1x = lx(b, vx), l0x = 1.f - l1x;
            for (int64_t ch = 0; ch < c; ++ch) {
              const float px = l0y * (l0x * float(src(b, r0, c0, ch)) + l1x * float(src(b, r0, c1, ch))) +
                               l1y * (l0x * float(src(b, r1, c0, ch)) + l1x * float(src(b, r1, c1, ch)));
              dst(b, ch, y, x) = pixel_out<Out>(px, scale(ch), shift(ch));
            }
          }
      };
#ifdef KOKKOS_ENABLE_SERIAL
  if (p.serial) {  // a loader thread: Kokkos' parallel host space belongs to the compute threads
    Kokkos::parallel_for("Data::normalize_augment", Kokkos::RangePolicy<Kokkos::Serial>(0, n), body);
    return;
  }
#endif
  Kokkos::parallel_for("Data::normalize_augment", Kokkos::RangePolicy<Host>(0, n), body);
  Kokkos::fence();
}

}  // namespace

void render_views(const RenderPass& p, int64_t n, int64_t h, int64_t w, int64_t c, const std::vector<double>& mean,
                  const std::vector<double>& std, int64_t s, float* out) {
  render_views_as(p, n, h, w, c, mean, std, s, out);
}

void render_views(const RenderPass& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t s, uint8_t* out) {
  const std::vector<double> unused_mean(static_cast<size_t>(c), 0.0), unused_std(static_cast<size_t>(c), 1.0);
  render_views_as(p, n, h, w, c, unused_mean, unused_std, s, out);
}

std::vector<float> normalization_table(int64_t c, const std::vector<double>& mean, const std::vector<double>& std) {
  // Grey level g in column g of a 1 x 256 image of c channels, rendered as a
  // view of its own size (the kernel's copy path): the table holds exactly
  // the values render_views() writes for whole grey levels.
  std::vector<uint8_t> levels(static_cast<size_t>(256 * c));
  for (int64_t g = 0; g < 256; ++g)
    for (int64_t ch = 0; ch < c; ++ch) levels[g * c + ch] = static_cast<uint8_t>(g);
  const ViewParams whole{0, 0, 1, 256, 0};
  RenderPass p;
  p.pixels = levels.data();
  p.views = &whole;
  p.serial = true;
  std::vector<float> table(static_cast<size_t>(c * 256));
  render_views(p, 1, 1, 256, c, mean, std, 0, table.data());
  return table;
}

bool transforms_can_run_on_loader_threads() {
#ifdef KOKKOS_ENABLE_SERIAL
  return true;
#else
  return false;
#endif
}

void mix_image(const MixParams& m, float* own, const float* other, int64_t c, int64_t s) {
  const int64_t plane = s * s, image = c * plane;
  if (m.kind == MixKind::Mixup) {
    const float wo = m.lam, wp = 1.f - m.lam;
    for (int64_t i = 0; i < image; ++i) own[i] = wo * own[i] + wp * other[i];  // mix_value's formula
  } else if (m.kind == MixKind::CutMix) {
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = m.y0; y < m.y1; ++y)
        std::copy(other + ch * plane + y * s + m.x0, other + ch * plane + y * s + m.x1, own + ch * plane + y * s + m.x0);
  }
}

// The pairs run one after another on the calling thread, sharing one copy of
// a view (a memory-bound pass, a small fraction of the resampling before it).
void mix_pairs(const int64_t* pairs, int64_t p, const MixParams* mix, int64_t c, int64_t s, float* out) {
  const int64_t image = c * s * s;
  std::vector<float> first(static_cast<size_t>(p > 0 ? image : 0));
  for (int64_t j = 0; j < p; ++j) {
    const int64_t k = pairs[2 * j], q = pairs[2 * j + 1];
    float* a = out + k * image;
    float* b = out + q * image;
    if (mix[q].kind != MixKind::None) std::copy(a, a + image, first.data());
    mix_image(mix[k], a, b, c, s);
    mix_image(mix[q], b, first.data(), c, s);
  }
}

void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out, int64_t s) {
  RenderPass p;
  p.pixels = pixels;
  p.views = views;
  render_views(p, n, h, w, c, mean, std, s, out);
}

}  // namespace vitkd
