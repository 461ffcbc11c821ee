#pragma once
// The image transforms of the loader: from a stored image (uint8 [H, W, C])
// to the model's input (float [C, S, S], S = model.image_size), normalized
// per channel. One file per family:
//   crops.cpp     where a view's box lies: the padded random crop (the
//                 Fashion-MNIST and CIFAR recipe), the random-resized crop
//                 (torchvision's RandomResizedCrop) and the evaluation view
//                 (resize and centre crop, timm's crop_pct)
//   resample.cpp  the batch kernel ("Data::normalize_augment"): each view's
//                 box resampled to S x S (bilinear, or a copy with zero
//                 padding when the box has the output's size), mirrored when
//                 its flip is set, normalized
//
// Replayable views. The random choices of sample i are a pure function of
// (seed, epoch, i's index in the split) -- view_params() -- so they do not
// depend on the rank count or on the order samples arrive in, and they can be
// written down (ViewParams) and replayed later (normalize_views()): the live
// path normalize_augment() is exactly view_params() followed by
// normalize_views(), so both produce the same bits.
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

/// How a training view's box is chosen (data.crop).
enum class CropKind : uint8_t {
  Pad,            ///< "pad": a shift in [-pad, pad], the box the stored size, zero padding
  RandomResized,  ///< "random_resized": torchvision's RandomResizedCrop(scale, ratio)
};

struct AugmentSpec {
  bool enabled = false;  ///< off: the evaluation view (crop_pct), normalization
  CropKind crop = CropKind::Pad;
  int64_t pad = 2;       ///< Pad: crop shift range in pixels
  bool flip = true;      ///< random horizontal flip (probability 1/2)
  double scale_min = 0.08, scale_max = 1.0;      ///< RandomResized: box area / image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  ///< RandomResized: box width / height
  /// The evaluation view of images stored larger than the output (timm's
  /// crop_pct): the shorter side resized to floor(out / crop_pct), then the
  /// centred out x out crop. Images stored at the output size are used whole.
  double crop_pct = 0.875;
  int64_t out = 0;       ///< output side S in pixels (model.image_size); 0 = the stored H x W
  uint64_t seed = 0;
};

/// The output side for images of h x w pixels: aug.out, or h when 0.
int64_t output_side(const AugmentSpec& aug, int64_t h);

/// The transform of images stored at h x w as one line of configuration
/// text, e.g. `data.augment = true, data.crop = "random_resized",
/// data.crop_scale = [0.08, 1], ..., model.image_size = 224`, naming only
/// what changes the views (data.crop_pct only without augmentation, the
/// output size only when it is not the stored size): what a teacher-view
/// cache records and compares.
std::string transform_text(const AugmentSpec& aug, int64_t h, int64_t w);

/// One view of one image, as it is stored (e.g. in a teacher-view cache).
/// Units are pixels of the stored image. The view is the crop box with
/// top-left corner (top, left) and size height x width -- rows and columns
/// outside the image read as 0 (the image zero-padded), so with the pad crop
/// top and left lie in [-pad, pad] -- resampled to the output size S x S
/// (a copy when the box is S x S), then, if flip = 1, mirrored left-right.
/// Boxes of another size than the output lie inside the image.
/// Without augmentation, at the stored size, a view is {0, 0, H, W, 0}.
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
/// function of (aug.seed, epoch, index) and of the spec.
ViewParams view_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t h, int64_t w);
/// view_params() for `n` samples `indices` into `out` [n].
void view_params(const AugmentSpec& aug, int64_t epoch, const int64_t* indices, int64_t n, int64_t h,
                 int64_t w, ViewParams* out);

/// The random-resized crop's box, given the uniform numbers it draws:
/// torchvision's RandomResizedCrop.get_params (up to 10 tries of an area
/// fraction u_area[t] in [0, 1) mapped to [scale_min, scale_max), a log-aspect
/// u_ratio[t], positions u_top[t], u_left[t]; then the centred fallback).
/// Rounding is half away from zero (Python rounds half to even).
ViewParams random_resized_box(const AugmentSpec& aug, int64_t h, int64_t w, const double* u_area,
                              const double* u_ratio, const double* u_top, const double* u_left);

/// The evaluation view's box for images of h x w pixels and output side s.
ViewParams eval_box(double crop_pct, int64_t h, int64_t w, int64_t s);

/// `out` must hold n*C*S*S floats, S = aug.out (n*C*H*W when aug.out = 0). `mean`/`std` are
/// per channel in pixel/255 units.
void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out);

/// Replays the views `views` [n] on `pixels` [n, H, W, C] into `out`
/// [n, C, S, S], normalized as normalize_augment() does; the same bits as
/// normalize_augment() where the views are its view_params(). `s` = 0: the
/// stored size (out [n, C, H, W]).
void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out, int64_t s = 0);

}  // namespace vitkd
