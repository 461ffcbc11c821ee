#pragma once
// Batch preprocessing as one Kokkos kernel ("Data::normalize_augment"):
// uint8 [n, H, W, C] pixels -> float [n, C, H, W], normalized per channel,
// with an optional random crop (zero-padded by `pad` pixels, i.e. a shift in
// [-pad, pad]) and horizontal flip.
//
// Replayable views. The random choices of sample i are a pure function of
// (seed, epoch, i's index in the split) -- view_params() -- so they do not
// depend on the rank count or on the order samples arrive in, and they can be
// written down (ViewParams) and replayed later (normalize_views()): the live
// path normalize_augment() is exactly view_params() followed by
// normalize_views(), so both produce the same bits.
#include <cstdint>
#include <vector>

namespace vitkd {

struct AugmentSpec {
  bool enabled = false;  ///< off: normalization only
  int64_t pad = 2;       ///< crop shift range in pixels
  bool flip = true;      ///< random horizontal flip
  uint64_t seed = 0;
};

/// One view of one image, as it is stored (e.g. in a teacher-view cache).
/// Units are pixels of the stored image. The view is the crop box with
/// top-left corner (top, left) and size height x width -- rows and columns
/// outside the image read as 0 (the image zero-padded), so top and left lie
/// in [-pad, pad] -- then, if flip = 1, mirrored left-right. The output has
/// the box's size; vitkd's crops keep the image size (height = H, width = W).
/// Without augmentation a view is {0, 0, H, W, 0}.
struct ViewParams {
  int16_t top = 0;     ///< row of the box's first row in the image (pixels, may be < 0)
  int16_t left = 0;    ///< column of the box's first column (pixels, may be < 0)
  int16_t height = 0;  ///< box rows (pixels)
  int16_t width = 0;   ///< box columns (pixels)
  uint8_t flip = 0;    ///< 1: horizontal mirror after the crop
  bool operator==(const ViewParams& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width && flip == o.flip;
  }
};

/// The view of sample `index` in `epoch` for images of h x w pixels: a pure
/// function of (aug.seed, epoch, index) (and of aug.enabled/pad/flip).
ViewParams view_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t h, int64_t w);
/// view_params() for `n` samples `indices` into `out` [n].
void view_params(const AugmentSpec& aug, int64_t epoch, const int64_t* indices, int64_t n, int64_t h,
                 int64_t w, ViewParams* out);

/// `out` must hold n*C*H*W floats. `mean`/`std` are per channel in pixel/255 units.
void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out);

/// Replays the views `views` [n] (each of size h x w) on `pixels` [n, H, W, C]
/// into `out` [n, C, H, W], normalized as normalize_augment() does; the same
/// bits as normalize_augment() where the views are its view_params().
void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out);

}  // namespace vitkd
