#pragma once
// The one resizer of vitkd: which source pixels an output pixel of a resized
// image axis reads, and with what weights (its taps), written once for both
// users:
//   the loader's views  (data/transforms/resample.cpp, the batch kernel):
//                       bilinear_tap<float>() for every resampled box, in
//                       float, as PyTorch's interpolate(mode="bilinear",
//                       align_corners=False, antialias=False)
//   `vitkd prepare folder` (data/image_folder.cpp): resize_centre_crop(),
//                       the shorter side to S, then the centred S x S, in
//                       double: area_taps() when shrinking, bilinear_tap<
//                       double>() when enlarging (resize_taps())
//
// Pixel-centre convention (PyTorch's align_corners = false, PIL's, OpenCV's):
// source pixel i covers [i, i + 1) with its centre at i + 0.5, and output
// pixel o of an axis of n source pixels resized to len covers the source
// interval [o n / len, (o + 1) n / len).
#include <cstdint>
#include <utility>
#include <vector>

namespace vitkd {

/// A two-tap bilinear sample: weight 1 - l on source pixel i0, l on i1.
template <typename T>
struct LinearTap {
  int64_t i0 = 0, i1 = 0;
  T l = 0;
};

/// The bilinear taps of output pixel `o` of an axis of `box` source pixels
/// resized to `size`: the output centre's source coordinate (o + 0.5) *
/// box / size - 0.5 (computed as ratio * (o + 0.5) - 0.5 in T, ratio = box /
/// size), clamped at 0; i0 its integer part, i1 = min(i0 + 1, box - 1), l
/// the fraction (PyTorch's area_pixel_compute_source_index and its
/// bilinear kernel). Past the last centre both taps are the last pixel, so
/// the edges repeat. Without antialiasing: shrinking samples, not averages.
template <typename T>
inline LinearTap<T> bilinear_tap(int64_t box, int64_t size, int64_t o) {
  const T ratio = static_cast<T>(box) / static_cast<T>(size);
  T src = ratio * (static_cast<T>(o) + T(0.5)) - T(0.5);
  if (src < T(0)) src = T(0);
  const int64_t i = static_cast<int64_t>(src);
  LinearTap<T> t;
  t.i0 = i;
  t.i1 = i + (i < box - 1 ? 1 : 0);
  t.l = src - static_cast<T>(i);
  return t;
}

/// The taps of one output pixel: (source index, weight), weights summing to 1.
using AxisTaps = std::vector<std::pair<int64_t, double>>;

/// The area taps of output pixel `o` of an axis of n source pixels shrunk to
/// len <= n pixels: every source pixel that the output's interval [o n / len,
/// (o + 1) n / len) overlaps, weighted by the overlap over the interval's
/// length (a box filter of exact coverage; 1 tap of weight 1 when len = n).
AxisTaps area_taps(int64_t n, int64_t len, int64_t o);

/// prepare's taps of output positions [off, off + out) of an axis of n
/// source pixels resized to len: area_taps() when shrinking (len <= n),
/// bilinear_tap<double>() when enlarging.
std::vector<AxisTaps> resize_taps(int64_t n, int64_t len, int64_t off, int64_t out);

/// `vitkd prepare folder`'s resize: `in` [h, w, c] with its shorter side
/// resized to `size` (the longer one to round(longer * size / shorter), at
/// least size) through resize_taps(), then the centred size x size crop,
/// into `out` [size, size, c]; each value the taps' weighted sum in double,
/// rounded to the nearest grey level (half away from zero).
void resize_centre_crop(const uint8_t* in, int64_t h, int64_t w, int64_t c, int64_t size, uint8_t* out);

}  // namespace vitkd
