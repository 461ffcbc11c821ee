// The photo transforms of data/transforms: the random-resized crop's boxes,
// the bilinear resampling against LibTorch's own interpolate(), the
// evaluation view, and replay.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "data/tensors.hpp"
#include "data/transforms/transforms.hpp"

using namespace vitkd;

namespace {

AugmentSpec resized_spec(int64_t out) {
  AugmentSpec a;
  a.enabled = true;
  a.crop = CropKind::RandomResized;
  a.out = out;
  a.seed = 7;
  return a;
}

std::vector<uint8_t> noise_pixels(int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> px(static_cast<size_t>(n * h * w * c));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  return px;
}

// The reference: LibTorch's bilinear interpolate (align_corners = false, no
// antialiasing, as torchvision's tensor transforms with antialias=False and
// PyTorch's interpolate default) of the crop box, then the mirror, then
// (p/255 - mean) / std. in: uint8 [H, W, C] of one image.
torch::Tensor reference_view(const uint8_t* in, int64_t h, int64_t w, int64_t c, const ViewParams& v, int64_t s,
                             const std::vector<double>& mean, const std::vector<double>& stdv) {
  auto img = torch::from_blob(const_cast<uint8_t*>(in), {h, w, c}, torch::kUInt8)
                 .to(torch::kFloat64)
                 .permute({2, 0, 1})
                 .unsqueeze(0);
  auto box = img.slice(2, v.top, v.top + v.height).slice(3, v.left, v.left + v.width);
  namespace F = torch::nn::functional;
  auto r = F::interpolate(box, F::InterpolateFuncOptions()
                                   .size(std::vector<int64_t>{s, s})
                                   .mode(torch::kBilinear)
                                   .align_corners(false));
  if (v.flip) r = r.flip({3});
  auto m = torch::tensor(mean, torch::kFloat64).view({1, c, 1, 1});
  auto sd = torch::tensor(stdv, torch::kFloat64).view({1, c, 1, 1});
  return ((r / 255.0 - m) / sd).squeeze(0);
}

}  // namespace

// Cases worked by hand from torchvision's RandomResizedCrop.get_params.
TEST(Transforms, RandomResizedBoxFollowsTorchvisionsRule) {
  AugmentSpec a = resized_spec(224);
  const double zero[10] = {0}, half[10] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  double last[10];
  std::fill(last, last + 10, 0.999999);
  // Area fraction fixed at 0.25 and aspect 1 on 100 x 100: a 50 x 50 box;
  // torch.randint(0, 51) at u -> floor(u * 51).
  a.scale_min = a.scale_max = 0.25;
  a.ratio_min = a.ratio_max = 1.0;
  ViewParams v = random_resized_box(a, 100, 100, zero, zero, zero, zero);
  EXPECT_EQ(v, (ViewParams{0, 0, 50, 50, 0}));
  v = random_resized_box(a, 100, 100, zero, zero, last, half);
  EXPECT_EQ(v, (ViewParams{50, 25, 50, 50, 0}));
  // Area 0.5 of 100 x 200 = 10000 at aspect 4: w = sqrt(40000) = 200, h = 50.
  a.scale_min = a.scale_max = 0.5;
  a.ratio_min = a.ratio_max = 4.0;
  v = random_resized_box(a, 100, 200, zero, zero, zero, zero);
  EXPECT_EQ(v, (ViewParams{0, 0, 50, 200, 0}));
  // The aspect drawn log-uniformly: u = 0.5 of [1/4, 4] is aspect 1.
  a.scale_min = a.scale_max = 0.36;
  a.ratio_min = 0.25;
  a.ratio_max = 4.0;
  v = random_resized_box(a, 100, 100, zero, half, zero, zero);
  EXPECT_EQ(v, (ViewParams{0, 0, 60, 60, 0}));
  // No try fits (the whole area at aspect 2..3 is wider than the image): the
  // fallback, the centred box of the image's full width at aspect 2.
  a.scale_min = a.scale_max = 1.0;
  a.ratio_min = 2.0;
  a.ratio_max = 3.0;
  v = random_resized_box(a, 100, 100, half, half, half, half);
  EXPECT_EQ(v, (ViewParams{25, 0, 50, 100, 0}));
  // ... and at aspect 1/3..1/2 the full height, width round(100 * 1/2).
  a.ratio_min = 1.0 / 3.0;
  a.ratio_max = 0.5;
  v = random_resized_box(a, 100, 100, half, half, half, half);
  EXPECT_EQ(v, (ViewParams{0, 25, 100, 50, 0}));
  // Tries that do not fit are skipped: the first try (area 1, aspect 4/3) is
  // too wide, the second (area 0.25, aspect 1) fits.
  a.scale_min = 0.25;
  a.scale_max = 1.0;
  a.ratio_min = 0.75;
  a.ratio_max = 4.0 / 3.0;
  const double area[10] = {0.999999, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ratio[10] = {0.999999, 0.5, 0, 0, 0, 0, 0, 0, 0, 0};
  v = random_resized_box(a, 100, 100, area, ratio, zero, zero);
  EXPECT_EQ(v, (ViewParams{0, 0, 50, 50, 0}));
}

// Over many samples the keyed boxes have the distribution the rule gives:
// inside the image, area fraction in the scale range and aspect in the
// ratio range (up to rounding to whole pixels), both spread over the range,
// and about half of them mirrored.
TEST(Transforms, RandomResizedBoxesCoverTheirRanges) {
  const AugmentSpec a = resized_spec(224);
  const int64_t H = 256, W = 256, n = 20000;
  int64_t flips = 0, small = 0, large = 0, wide = 0, tall = 0;
  for (int64_t i = 0; i < n; ++i) {
    const ViewParams v = view_params(a, 3, i, H, W);
    ASSERT_GE(v.top, 0);
    ASSERT_GE(v.left, 0);
    ASSERT_LE(v.top + v.height, H);
    ASSERT_LE(v.left + v.width, W);
    const double frac = double(v.height) * v.width / double(H * W);
    const double aspect = double(v.width) / v.height;
    ASSERT_GE(frac, 0.08 * 0.9) << i;
    ASSERT_LE(frac, 1.0) << i;
    ASSERT_GE(aspect, 0.75 * 0.95) << i;
    ASSERT_LE(aspect, 4.0 / 3.0 * 1.05) << i;
    flips += v.flip;
    small += frac < 0.2;
    large += frac > 0.8;
    wide += aspect > 1.25;
    tall += aspect < 0.8;
  }
  EXPECT_NEAR(double(flips) / n, 0.5, 0.02);
  // Area uniform on [0.08, 1), but a try whose box does not fit (area
  // fraction f > 0.75 at an aspect beyond 1/f or f, 14 % of tries here) is
  // redrawn: 0.1304 / (1 - 0.1424) = 15.2 % of the boxes lie below 0.2.
  EXPECT_NEAR(double(small) / n, 0.152, 0.01);
  EXPECT_GT(large, n / 50);
  // Aspect log-uniform on [3/4, 4/3]: 11 % each beyond 1.25 and below 0.8
  // before rounding and redraws.
  EXPECT_GT(wide, n / 20);
  EXPECT_GT(tall, n / 20);
}

// Each resampled view equals LibTorch's bilinear interpolate of its box
// (float64, then mirrored and normalized) within 1e-3 of a grey level, at
// upsampling, downsampling, unequal scales, flips, and 1 and 3 channels.
TEST(Transforms, ResampledViewsEqualTorchInterpolate) {
  for (const int64_t C : {1, 3}) {
    const int64_t n = 48, H = 40, W = 33, S = 24;
    const std::vector<uint8_t> px = noise_pixels(n, H, W, C);
    std::vector<ViewParams> views(n);
    for (int64_t b = 0; b < n; ++b) {
      // Boxes from 5 x 7 (upsampled about 4x) to the whole image (downsampled).
      const int16_t bh = static_cast<int16_t>(5 + (b * 7) % (H - 4)), bw = static_cast<int16_t>(7 + (b * 5) % (W - 6));
      views[b] = ViewParams{static_cast<int16_t>((b * 3) % (H - bh + 1)), static_cast<int16_t>((b * 11) % (W - bw + 1)),
                            bh, bw, static_cast<uint8_t>(b % 2)};
    }
    views[0] = ViewParams{0, 0, static_cast<int16_t>(H), static_cast<int16_t>(W), 1};
    const std::vector<double> mean(C, 0.45), stdv(C, 0.22);
    std::vector<float> out(static_cast<size_t>(n * C * S * S));
    normalize_views(px.data(), views.data(), n, H, W, C, mean, stdv, out.data(), S);
    const double grey = 1.0 / (255.0 * 0.22);  // one grey level in normalized units
    double worst = 0;
    for (int64_t b = 0; b < n; ++b) {
      auto want = reference_view(px.data() + b * H * W * C, H, W, C, views[b], S, mean, stdv);
      auto got = torch::from_blob(out.data() + b * C * S * S, {C, S, S}, torch::kFloat32).to(torch::kFloat64);
      worst = std::max(worst, (got - want).abs().max().item<double>() / grey);
    }
    EXPECT_LT(worst, 1e-3) << "channels " << C << ": worst difference " << worst << " grey levels";
  }
}

// The evaluation view: images stored at the output size are used whole;
// larger ones are centre-cropped as torchvision's Resize(floor(S / crop_pct))
// + CenterCrop(S) (a 256 store at S = 224: the centred 224 x 224, copied).
TEST(Transforms, EvaluationViewIsTheCentreCrop) {
  EXPECT_EQ(eval_box(0.875, 28, 28, 28), (ViewParams{0, 0, 28, 28, 0}));
  EXPECT_EQ(eval_box(0.875, 256, 256, 224), (ViewParams{16, 16, 224, 224, 0}));
  // 300 stored: 224 * 300 / 256 = 262.5 -> 263 pixels, at (300 - 263) / 2 = 18.
  EXPECT_EQ(eval_box(0.875, 300, 300, 224), (ViewParams{18, 18, 263, 263, 0}));
  EXPECT_EQ(eval_box(1.0, 256, 256, 224), (ViewParams{0, 0, 256, 256, 0}));
  // Not square: the shorter side decides, the box is square and centred.
  EXPECT_EQ(eval_box(0.875, 256, 320, 224), (ViewParams{16, 48, 224, 224, 0}));
  AugmentSpec off;
  off.out = 224;
  EXPECT_EQ(view_params(off, 5, 17, 256, 256), (ViewParams{16, 16, 224, 224, 0}));
  // The pixels: a copy of the centre.
  const int64_t H = 256, S = 224;
  const std::vector<uint8_t> px = noise_pixels(1, H, H, 3);
  std::vector<float> out(3 * S * S);
  const int64_t idx = 0;
  normalize_augment(px.data(), &idx, 1, H, H, 3, {0.0, 0.0, 0.0}, {1.0, 1.0, 1.0}, off, 0, out.data());
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < S; y += 37)
      for (int64_t x = 0; x < S; x += 29)
        ASSERT_EQ(out[(c * S + y) * S + x], px[((y + 16) * H + x + 16) * 3 + c] * static_cast<float>(1.0 / 255.0));
}

// Views are keyed on (seed, epoch, index): the same sample gets the same
// view in any batch, and replaying written-down views gives the live bits.
TEST(Transforms, RandomResizedViewsReplayBitwiseInAnyBatch) {
  const int64_t n = 32, H = 48, W = 48, C = 3, S = 32;
  const std::vector<uint8_t> px = noise_pixels(n, H, W, C);
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = 500 + 3 * i;
  const std::vector<double> mean{0.4, 0.5, 0.6}, stdv{0.2, 0.3, 0.25};
  AugmentSpec a = resized_spec(S);
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<float> live(static_cast<size_t>(n * C * S * S)), replay(live.size()), one(C * S * S);
    normalize_augment(px.data(), idx.data(), n, H, W, C, mean, stdv, a, e, live.data());
    std::vector<ViewParams> v(n);
    view_params(a, e, idx.data(), n, H, W, v.data());
    normalize_views(px.data(), v.data(), n, H, W, C, mean, stdv, replay.data(), S);
    ASSERT_EQ(0, std::memcmp(live.data(), replay.data(), live.size() * sizeof(float))) << "epoch " << e;
    const int64_t b = 13;
    normalize_augment(px.data() + b * H * W * C, idx.data() + b, 1, H, W, C, mean, stdv, a, e, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), live.data() + b * C * S * S, one.size() * sizeof(float)));
  }
  EXPECT_FALSE(view_params(a, 0, 7, H, W) == view_params(a, 1, 7, H, W));
}

// data.transfer = "uint8": the views rendered as grey levels, normalized by
// the table (normalize_grey_levels, as on the GPU), give the float views'
// bits where a view is a copy (the pad crop's shifts, zero padding, mirror;
// the evaluation view's centre crop), and differ by at most half a grey
// level where it is resampled (the rounding to whole levels), with some
// pixels really rounded. The table is (g / 255 - mean) / std.
TEST(Transforms, GreyLevelViewsNormalizeToTheFloatViews) {
  const int64_t n = 24, H = 40, W = 40, C = 3;
  const std::vector<uint8_t> px = noise_pixels(n, H, W, C);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 100);
  const std::vector<double> mean{0.485, 0.456, 0.406}, stdv{0.229, 0.224, 0.225};  // ImageNet's
  const auto table = torch::from_blob(normalization_table(C, mean, stdv).data(), {C, 256}, torch::kFloat32).clone();
  for (int64_t ch = 0; ch < C; ++ch)
    for (int64_t g = 0; g < 256; g += 17)
      EXPECT_NEAR(table[ch][g].item<float>(), (g / 255.0 - mean[ch]) / stdv[ch], 1e-6);
  AugmentSpec pad;  // copies: shifted by up to 4 pixels, zero padded, mirrored
  pad.enabled = true;
  pad.pad = 4;
  pad.seed = 3;
  AugmentSpec centre;  // the evaluation view of a 40 store at 32: a copy of the centre
  centre.out = 32;
  centre.crop_pct = 0.8;
  AugmentSpec resized = resized_spec(32);  // resampled
  for (const AugmentSpec* a : {&pad, &centre, &resized}) {
    ASSERT_TRUE(transform_ends_in_grey_levels(*a));
    const int64_t S = output_side(*a, H);
    ImageBatch b;
    b.n = n, b.h = H, b.w = W, b.c = C, b.epoch = 2;
    b.pixels = px.data();
    b.indices = idx.data();
    std::vector<float> want(static_cast<size_t>(n * C * S * S));
    transform_batch(b, *a, mean, stdv, nullptr, nullptr, 0, want.data(), nullptr);
    auto grey = torch::empty({n, C, S, S}, torch::kUInt8);
    transform_batch(b, *a, nullptr, grey.data_ptr<uint8_t>());
    const auto got = normalize_grey_levels(grey, table);
    const auto ref = torch::from_blob(want.data(), {n, C, S, S}, torch::kFloat32);
    if (a != &resized) {
      ASSERT_EQ(0, std::memcmp(got.data_ptr<float>(), want.data(), want.size() * sizeof(float)))
          << "a copied view differs from the float path";
    } else {
      // Half a grey level of the widest channel (the smallest std), and float rounding.
      const double half = 0.5 / (255.0 * 0.224) + 1e-5;
      const double worst = (got - ref).abs().max().item<double>();
      EXPECT_LE(worst, half);
      EXPECT_GT(worst, 0.25 / (255.0 * 0.229)) << "no pixel was rounded: not a resampled view";
    }
  }
  AugmentSpec mixed = resized;
  mixed.mix.mixup_alpha = 0.8;
  EXPECT_FALSE(transform_ends_in_grey_levels(mixed));
}

// The text a teacher-view cache compares names exactly what changes views.
TEST(Transforms, TransformTextNamesWhatChangesTheViews) {
  AugmentSpec pad;
  pad.enabled = true;
  pad.out = 28;
  EXPECT_EQ(transform_text(pad, 28, 28), "data.augment = true, data.crop = \"pad\", data.crop_pad = 2, data.flip = true");
  AugmentSpec off;
  off.out = 28;
  EXPECT_EQ(transform_text(off, 28, 28), "data.augment = false");
  off.out = 224;
  EXPECT_EQ(transform_text(off, 256, 256), "data.augment = false, data.crop_pct = 0.875, model.image_size = 224");
  const AugmentSpec rrc = resized_spec(224);
  EXPECT_EQ(transform_text(rrc, 256, 256),
            "data.augment = true, data.crop = \"random_resized\", data.crop_scale = [0.08, 1], data.crop_ratio = "
            "[0.75, 1.333333333], data.flip = true, model.image_size = 224");
  AugmentSpec all = rrc;  // erasing and mixing change the views too
  all.erase_prob = 0.25;
  all.mix.mixup_alpha = 0.8;
  all.mix.cutmix_alpha = 1.0;
  EXPECT_EQ(transform_text(all, 256, 256),
            "data.augment = true, data.crop = \"random_resized\", data.crop_scale = [0.08, 1], data.crop_ratio = "
            "[0.75, 1.333333333], data.flip = true, data.random_erase = 0.25, data.mixup = 0.8, data.cutmix = 1, "
            "data.mixup_prob = 1, data.mixup_switch_prob = 0.5, model.image_size = 224");
}
