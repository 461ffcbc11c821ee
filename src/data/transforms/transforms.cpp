// The live transform: each sample's view chosen (crops.cpp), then the batch
// resampled and normalized (resample.cpp).
#include "data/transforms/transforms.hpp"

#include <cstdio>

namespace vitkd {
namespace {

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

}  // namespace

int64_t output_side(const AugmentSpec& aug, int64_t h) { return aug.out > 0 ? aug.out : h; }

std::string transform_text(const AugmentSpec& aug, int64_t h, int64_t w) {
  const int64_t s = output_side(aug, h);
  std::string t = "data.augment = " + std::string(aug.enabled ? "true" : "false");
  if (aug.enabled) {
    if (aug.crop == CropKind::Pad) {
      t += ", data.crop = \"pad\", data.crop_pad = " + std::to_string(aug.pad);
    } else {
      t += ", data.crop = \"random_resized\", data.crop_scale = [" + number(aug.scale_min) + ", " +
           number(aug.scale_max) + "], data.crop_ratio = [" + number(aug.ratio_min) + ", " + number(aug.ratio_max) +
           "]";
    }
    t += ", data.flip = " + std::string(aug.flip ? "true" : "false");
  } else if (h != s || w != s) {
    t += ", data.crop_pct = " + number(aug.crop_pct);  // the evaluation view of larger images
  }
  if (h != s || w != s) t += ", model.image_size = " + std::to_string(s);
  return t;
}

void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out) {
  std::vector<ViewParams> views(static_cast<size_t>(n));
  view_params(aug, epoch, indices, n, h, w, views.data());
  normalize_views(pixels, views.data(), n, h, w, c, mean, std, out, aug.out);
}

}  // namespace vitkd
