// The loader (data/loader.hpp) at one rank: the epoch permutation, global
// batches independent of the rank count, loader threads; the augmentation's
// views keyed on the sample index and replayed bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <set>

#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/tensors.hpp"
#include "data/transforms/transforms.hpp"
#include "data_fixtures.hpp"
#include "fixtures.hpp"

using namespace vitkd;
using vitkd::test::small_split;

TEST(Loader, PermutationIsDeterministicPerEpoch) {
  auto a = epoch_permutation(1000, 7, 0), b = epoch_permutation(1000, 7, 0);
  auto c = epoch_permutation(1000, 7, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto s = a;
  std::sort(s.begin(), s.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(s[i], i);
}

TEST(Loader, GlobalBatchesDoNotDependOnRankCount) {
  // 3 ranks x 4 samples see the same samples per step as 1 rank x 12 (and 2 x 6).
  const auto perm = epoch_permutation(100, 3, 2);
  const int64_t G = 12;
  for (int64_t step = 0; step < steps_per_epoch(100, G, false); ++step) {
    auto one = rank_slice(perm, step, G, 0, 1);
    for (int P : {2, 3, 5}) {
      std::vector<int64_t> uni;
      for (int r = 0; r < P; ++r) {
        auto s = rank_slice(perm, step, G, r, P);
        uni.insert(uni.end(), s.begin(), s.end());
      }
      std::sort(uni.begin(), uni.end());
      EXPECT_EQ(uni, one) << "step " << step << " P " << P;
    }
  }
  // The remainder (100 = 8 * 12 + 4) is the last, smaller global batch.
  int64_t R = 0;
  rank_slice(perm, 8, G, 0, 3, &R);
  EXPECT_EQ(R, 4);
  EXPECT_EQ(steps_per_epoch(100, G, true), 8);
}

TEST(Loader, EverySampleOncePerEpochSingleRank) {
  const test::TempDir tmp;
  const std::string p = tmp / "ld.h5";
  DatasetSplit tr, te;
  small_split(tr, 50, 4, 2);
  small_split(te, 5, 4, 2);
  write_dataset(p, tr, te, 2, 2, 1, {"a", "b"});
  DatasetMeta m = validate_dataset(p);
  LoaderOptions o;
  o.batch_size = 8;
  o.prefetch = 2;
  Loader ld(m, o);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    ld.begin_epoch(epoch);
    std::multiset<int64_t> seen;
    while (auto b = ld.next()) {
      for (int64_t i = 0; i < b->size(); ++i) {
        seen.insert(b->indices[i]);
        EXPECT_EQ(b->pixels[i * 4], static_cast<uint8_t>(b->indices[i] % 256));  // right pixels
        EXPECT_EQ(b->labels[i], b->indices[i] % 2);                               // right labels
      }
    }
    EXPECT_EQ(seen.size(), 50u);
    for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(seen.count(i), 1u);
  }
  std::remove(p.c_str());
}

// Loader threads that read and transform ahead (data.loader_threads) hand
// the batches out in step order, each with the samples and the transformed
// input the single reading thread and the compute thread's transform give,
// bit for bit, with mixing on; and restarting an epoch mid-way drops the
// batches read ahead for the old one.
TEST(Loader, LoaderThreadsGiveTheSameBatchesInOrder) {
  const test::TempDir tmp;
  const std::string p = tmp / "lt.h5";
  DatasetSplit tr, te;
  small_split(tr, 70, 8 * 8 * 3, 3);
  small_split(te, 5, 8 * 8 * 3, 3);
  write_dataset(p, tr, te, 8, 8, 3, {"a", "b", "c"});
  DatasetMeta m = validate_dataset(p);
  AugmentSpec aug;
  aug.enabled = true;
  aug.crop = CropKind::RandomResized;
  aug.out = 6;
  aug.seed = 9;
  aug.trivial_augment = true;
  aug.erase_prob = 0.5;
  aug.mix.mixup_alpha = 0.8;
  aug.mix.cutmix_alpha = 1.0;
  {  // the loaders end (their threads joined) before the file goes
  LoaderOptions o;
  o.batch_size = 6;
  o.prefetch = 3;
  o.seed = 9;
  o.mix = true;
  o.mix_seed = 9;
  Loader plain(m, o);
  o.transform = [&](Batch& b) { transform_on_loader_thread(b, m, aug); };
  o.threads = 3;
  Loader ahead(m, o);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    plain.begin_epoch(epoch);
    ahead.begin_epoch(epoch);
    int64_t steps = 0;
    while (auto a = plain.next()) {
      auto b = ahead.next();
      ASSERT_TRUE(b.has_value());
      EXPECT_EQ(b->step, a->step);
      EXPECT_EQ(b->indices, a->indices);
      EXPECT_EQ(b->partner_indices, a->partner_indices);
      ASSERT_TRUE(b->transformed);
      transform_on_loader_thread(*a, m, aug);  // here, on this thread
      EXPECT_EQ(b->x, a->x) << "step " << a->step;
      EXPECT_EQ(b->y_soft, a->y_soft);
      ++steps;
    }
    EXPECT_FALSE(ahead.next().has_value());
    EXPECT_EQ(steps, plain.steps_per_epoch());
  }
  // Restart epoch 1 at step 2 after one batch: the next batch is step 2 of epoch 1.
  ahead.begin_epoch(0);
  ASSERT_TRUE(ahead.next().has_value());
  ahead.begin_epoch(1, 2);
  auto b = ahead.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->epoch, 1);
  EXPECT_EQ(b->step, 2);
  }
  std::remove(p.c_str());
}

TEST(Augment, NormalizesAndIsKeyedOnTheSampleIndex) {
  const int64_t H = 4, W = 4;
  std::vector<uint8_t> px(2 * H * W);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  std::vector<int64_t> idx{10, 11};
  std::vector<float> out(px.size());
  AugmentSpec off;
  normalize_augment(px.data(), idx.data(), 2, H, W, 1, {0.5}, {0.25}, off, 0, out.data());
  for (size_t i = 0; i < px.size(); ++i) EXPECT_NEAR(out[i], (px[i] / 255.0 - 0.5) / 0.25, 1e-5);
  // Flip only (pad 0): a mirror image, or the same image.
  AugmentSpec flip;
  flip.enabled = true;
  flip.pad = 0;
  int mirrored = 0;
  for (int64_t e = 0; e < 8; ++e) {
    normalize_augment(px.data(), idx.data(), 1, H, W, 1, {0.0}, {1.0}, flip, e, out.data());
    bool same = true, mirror = true;
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < W; ++x) {
        same &= std::abs(out[y * W + x] - px[y * W + x] / 255.f) < 1e-6;
        mirror &= std::abs(out[y * W + x] - px[y * W + (W - 1 - x)] / 255.f) < 1e-6;
      }
    EXPECT_TRUE(same || mirror);
    mirrored += mirror;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 8);
  // The same (seed, epoch, index) gives the same view whatever else is in the batch.
  AugmentSpec crop;
  crop.enabled = true;
  std::vector<float> a(2 * H * W), b(H * W);
  normalize_augment(px.data(), idx.data(), 2, H, W, 1, {0.0}, {1.0}, crop, 3, a.data());
  normalize_augment(px.data() + H * W, idx.data() + 1, 1, H, W, 1, {0.0}, {1.0}, crop, 3, b.data());
  for (int64_t i = 0; i < H * W; ++i) EXPECT_EQ(a[H * W + i], b[i]);
}

// A view is a pure function of (seed, epoch, index), written down as
// ViewParams; replaying the written-down views gives the live path's bits.
TEST(Augment, ReplayedViewsGiveTheLivePixelsBitwise) {
  const int64_t n = 64, H = 8, W = 6, C = 3;
  std::vector<uint8_t> px(n * H * W * C);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = 1000 + 7 * i;
  const std::vector<double> mean{0.2, 0.5, 0.7}, stdv{0.3, 0.25, 0.1};
  for (const bool flip : {false, true})
    for (const int64_t pad : {0, 1, 3})
      for (const uint64_t seed : {0ull, 42ull})
        for (int64_t e = 0; e < 3; ++e) {
          AugmentSpec aug;
          aug.enabled = true;
          aug.pad = pad;
          aug.flip = flip;
          aug.seed = seed;
          std::vector<float> live(px.size()), replay(px.size());
          normalize_augment(px.data(), idx.data(), n, H, W, C, mean, stdv, aug, e, live.data());
          std::vector<ViewParams> v(n);
          view_params(aug, e, idx.data(), n, H, W, v.data());
          normalize_views(px.data(), v.data(), n, H, W, C, mean, stdv, replay.data());
          ASSERT_EQ(0, std::memcmp(live.data(), replay.data(), live.size() * sizeof(float)))
              << "pad " << pad << " flip " << flip << " seed " << seed << " epoch " << e;
          // The written-down view means what ViewParams documents: the crop box
          // (top, left, height, width) of the zero-padded image, then the mirror.
          for (int64_t b = 0; b < n; ++b) {
            ASSERT_EQ(v[b].height, H);
            ASSERT_EQ(v[b].width, W);
            ASSERT_LE(std::abs(v[b].top), pad);
            ASSERT_LE(std::abs(v[b].left), pad);
            if (!flip) {
              ASSERT_EQ(v[b].flip, 0);
            }
            for (int64_t c = 0; c < C; ++c)
              for (int64_t y = 0; y < H; ++y)
                for (int64_t x = 0; x < W; ++x) {
                  const int64_t bx = v[b].flip ? W - 1 - x : x;  // column within the box
                  const int64_t sy = v[b].top + y, sx = v[b].left + bx;
                  const float p = sy >= 0 && sy < H && sx >= 0 && sx < W ? px[((b * H + sy) * W + sx) * C + c] : 0;
                  const float want = p * static_cast<float>(1.0 / (255.0 * stdv[c])) +
                                     static_cast<float>(-mean[c] / stdv[c]);
                  ASSERT_EQ(replay[((b * C + c) * H + y) * W + x], want) << b << " " << c << " " << y << " " << x;
                }
          }
        }
}

TEST(Augment, ViewParamsArePureFunctionsOfSeedEpochAndIndex) {
  AugmentSpec aug;
  aug.enabled = true;
  aug.pad = 2;
  aug.seed = 5;
  std::vector<int64_t> idx{3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<ViewParams> a(idx.size());
  view_params(aug, 2, idx.data(), idx.size(), 28, 28, a.data());
  for (size_t j = 0; j < idx.size(); ++j) EXPECT_TRUE(a[j] == view_params(aug, 2, idx[j], 28, 28)) << j;
  EXPECT_TRUE(a[1] == a[3]);  // the same sample, the same view
  int differ_epoch = 0, differ_seed = 0, flips = 0;
  AugmentSpec other = aug;
  other.seed = 6;
  for (int64_t i = 0; i < 200; ++i) {
    const ViewParams v = view_params(aug, 0, i, 28, 28);
    differ_epoch += !(v == view_params(aug, 1, i, 28, 28));
    differ_seed += !(v == view_params(other, 0, i, 28, 28));
    flips += v.flip;
  }
  EXPECT_GT(differ_epoch, 150);
  EXPECT_GT(differ_seed, 150);
  EXPECT_GT(flips, 60);
  EXPECT_LT(flips, 140);
  AugmentSpec off;  // no augmentation: the whole image, unmirrored
  EXPECT_TRUE(view_params(off, 7, 123, 28, 28) == (ViewParams{0, 0, 28, 28, 0}));
}

// The crop is a shift by (dy, dx) in [-pad, pad]^2 with zeros where the
// source falls outside the image: each output is exactly one such shift of
// its input (pixel values 1..36 are distinct and nonzero, so the shift is
// unique), every shift of the range occurs over 400 samples, and the shift
// (2, -2) is spelled out: out(y, x) = in(y + 2, x - 2), the bottom two rows and
// the left two columns zero.
TEST(Augment, CropIsAZeroPaddedShiftOfEveryOffsetWithinThePad) {
  const int64_t H = 6, W = 6, n = 400, pad = 2;
  std::vector<uint8_t> px(n * H * W);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(1 + i % (H * W));
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<float> out(px.size());
  AugmentSpec crop;
  crop.enabled = true;
  crop.pad = pad;
  crop.flip = false;
  crop.seed = 5;
  normalize_augment(px.data(), idx.data(), n, H, W, 1, {0.0}, {1.0}, crop, 1, out.data());
  auto src = [&](int64_t y, int64_t x) {
    return (y >= 0 && y < H && x >= 0 && x < W) ? static_cast<float>(1 + y * W + x) / 255.f : 0.f;
  };
  std::set<std::pair<int64_t, int64_t>> seen;
  const float* known = nullptr;
  for (int64_t b = 0; b < n; ++b) {
    const float* o = out.data() + b * H * W;
    std::vector<std::pair<int64_t, int64_t>> fits;
    for (int64_t dy = -pad - 1; dy <= pad + 1; ++dy)
      for (int64_t dx = -pad - 1; dx <= pad + 1; ++dx) {
        bool ok = true;
        for (int64_t y = 0; y < H && ok; ++y)
          for (int64_t x = 0; x < W && ok; ++x) ok = std::abs(o[y * W + x] - src(y + dy, x + dx)) < 1e-7f;
        if (ok) fits.emplace_back(dy, dx);
      }
    ASSERT_EQ(fits.size(), 1u) << "sample " << b << " is not one zero-padded shift of its input";
    EXPECT_LE(std::abs(fits[0].first), pad);
    EXPECT_LE(std::abs(fits[0].second), pad);
    seen.insert(fits[0]);
    if (fits[0] == std::make_pair(int64_t(2), int64_t(-2))) known = o;
  }
  EXPECT_EQ(seen.size(), size_t((2 * pad + 1) * (2 * pad + 1))) << "not every shift in [-pad, pad]^2 occurs";
  ASSERT_NE(known, nullptr);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const float want = (y + 2 < H && x - 2 >= 0) ? float(1 + (y + 2) * W + (x - 2)) / 255.f : 0.f;
      EXPECT_FLOAT_EQ(known[y * W + x], want) << "shift (2, -2) at (" << y << ", " << x << ")";
    }
}
