// The one resizer (data/transforms/resize.hpp): its taps pinned by hand,
// prepare's resize against hand-worked images and an exact rational
// reference, and the loader's view of a whole image against prepare's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "data/transforms/resize.hpp"
#include "data/transforms/transforms.hpp"

using namespace vitkd;

namespace {

void expect_taps(const AxisTaps& got, const AxisTaps& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].first, want[k].first) << what << ", tap " << k;
    EXPECT_NEAR(got[k].second, want[k].second, 1e-12) << what << ", tap " << k;
  }
}

// Exact taps from the definitions (integer numerators over `den`), written
// apart from resize.cpp: area, source interval [o n / len, (o + 1) n / len);
// bilinear, source coordinate ((2 o + 1) n - len) / (2 len), clamped at 0.
struct ExactTaps {
  std::vector<std::pair<int64_t, int64_t>> taps;
  int64_t den = 1;
};
ExactTaps exact_taps(int64_t n, int64_t len, int64_t o) {
  ExactTaps e;
  if (len <= n) {
    e.den = n;  // overlaps in 1/len of a pixel, over the interval's n/len
    for (int64_t i = 0; i < n; ++i) {
      const int64_t overlap = std::min((o + 1) * n, (i + 1) * len) - std::max(o * n, i * len);
      if (overlap > 0) e.taps.push_back({i, overlap});
    }
  } else {
    e.den = 2 * len;
    const int64_t s = std::max<int64_t>(0, (2 * o + 1) * n - len), i = s / (2 * len), r = s % (2 * len);
    e.taps = {{i, 2 * len - r}, {std::min(i + 1, n - 1), r}};
  }
  return e;
}

}  // namespace

// A shrink by 2 averages pixel pairs; 3 -> 2 splits the middle pixel by its
// overlap; the same size is one tap.
TEST(Resize, AreaTapsAreTheOverlaps) {
  for (int64_t o = 0; o < 4; ++o) expect_taps(area_taps(8, 4, o), {{2 * o, 0.5}, {2 * o + 1, 0.5}}, "8 -> 4");
  expect_taps(area_taps(3, 2, 0), {{0, 2.0 / 3}, {1, 1.0 / 3}}, "3 -> 2, first");
  expect_taps(area_taps(3, 2, 1), {{1, 1.0 / 3}, {2, 2.0 / 3}}, "3 -> 2, second");
  expect_taps(area_taps(5, 5, 3), {{3, 1.0}}, "5 -> 5");
}

// Half-pixel centres: 2 -> 4 reads source coordinates -0.25 (clamped to 0),
// 0.25, 0.75, 1.25 (past the last centre: the last pixel twice); a shrink by 2
// (the loader's, no antialiasing) lands halfway between each pair. Float and
// double take the same formula.
TEST(Resize, BilinearTapsAreHalfPixelCentres) {
  const int64_t i0[4] = {0, 0, 0, 1}, i1[4] = {1, 1, 1, 1};
  const double l[4] = {0.0, 0.25, 0.75, 0.25};
  for (int64_t o = 0; o < 4; ++o) {
    const auto d = bilinear_tap<double>(2, 4, o);
    const auto f = bilinear_tap<float>(2, 4, o);
    EXPECT_EQ(d.i0, i0[o]) << o;
    EXPECT_EQ(d.i1, i1[o]) << o;
    EXPECT_EQ(d.l, l[o]) << o;
    EXPECT_EQ(f.i0, i0[o]) << o;
    EXPECT_EQ(f.i1, i1[o]) << o;
    EXPECT_EQ(f.l, static_cast<float>(l[o])) << o;
  }
  for (int64_t o = 0; o < 3; ++o) {
    const auto t = bilinear_tap<float>(6, 3, o);
    EXPECT_EQ(t.i0, 2 * o);
    EXPECT_EQ(t.i1, 2 * o + 1);
    EXPECT_EQ(t.l, 0.5f);
  }
  // A one-pixel axis: every output reads pixel 0.
  for (int64_t o = 0; o < 3; ++o) EXPECT_EQ(bilinear_tap<float>(1, 3, o).i1, 0);
}

// prepare's taps: area when shrinking, bilinear (weights 1 - l, l) when
// enlarging, from the crop's offset on.
TEST(Resize, PrepareTakesAreaToShrinkAndBilinearToEnlarge) {
  const auto shrink = resize_taps(8, 4, 1, 2);
  expect_taps(shrink[0], area_taps(8, 4, 1), "shrink, offset 1");
  expect_taps(shrink[1], area_taps(8, 4, 2), "shrink, offset 1, next");
  const auto grow = resize_taps(2, 4, 1, 2);
  expect_taps(grow[0], {{0, 0.75}, {1, 0.25}}, "enlarge, offset 1");
  expect_taps(grow[1], {{0, 0.25}, {1, 0.75}}, "enlarge, offset 1, next");
}

// Worked by hand: columns 0, 30, 90 shrunk 3 -> 2 give 10 and 70; columns
// 0, 100 enlarged 2 -> 4 give 0, 25, 75, 100.
TEST(Resize, PrepareResizesSmallImagesAsWorkedByHand) {
  const uint8_t three[9] = {0, 30, 90, 0, 30, 90, 0, 30, 90};
  uint8_t two[4];
  resize_centre_crop(three, 3, 3, 1, 2, two);
  EXPECT_EQ(std::vector<int>(two, two + 4), (std::vector<int>{10, 70, 10, 70}));
  const uint8_t pair[4] = {0, 100, 0, 100};
  uint8_t four[16];
  resize_centre_crop(pair, 2, 2, 1, 4, four);
  for (int64_t y = 0; y < 4; ++y)
    EXPECT_EQ(std::vector<int>(four + 4 * y, four + 4 * y + 4), (std::vector<int>{0, 25, 75, 100})) << "row " << y;
}

// prepare's resize against the exact weighted sums (integers, from the
// definitions above), rounded half up: equal wherever the exact value is not
// a half grey level; on one, either neighbour (the double sum lands on either
// side). Images of 1 to 40 pixels a side, shrunk and enlarged, 1 and 3 channels.
TEST(Resize, PrepareIsTheExactWeightedSumRounded) {
  uint64_t state = 12345;
  auto next = [&]() { return (state = state * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  int64_t values = 0, ties = 0;
  for (int t = 0; t < 300; ++t) {
    const int64_t h = 1 + next() % 40, w = 1 + next() % 40, c = next() % 2 ? 3 : 1, s = 1 + next() % 48;
    std::vector<uint8_t> in(static_cast<size_t>(h * w * c)), out(static_cast<size_t>(s * s * c));
    for (auto& v : in) v = static_cast<uint8_t>(t % 3 ? next() % 256 : (next() % 2) * 255);
    resize_centre_crop(in.data(), h, w, c, s, out.data());
    const int64_t H2 = h <= w ? s : std::max<int64_t>(s, std::llround(double(h) * s / w));
    const int64_t W2 = h <= w ? std::max<int64_t>(s, std::llround(double(w) * s / h)) : s;
    for (int64_t y = 0; y < s; ++y)
      for (int64_t x = 0; x < s; ++x) {
        const ExactTaps ty = exact_taps(h, H2, y + (H2 - s) / 2), tx = exact_taps(w, W2, x + (W2 - s) / 2);
        const int64_t den = ty.den * tx.den;
        for (int64_t ch = 0; ch < c; ++ch) {
          int64_t num = 0;
          for (const auto& [iy, wy] : ty.taps)
            for (const auto& [ix, wx] : tx.taps) num += wy * wx * in[(iy * w + ix) * c + ch];
          const int64_t up = (2 * num + den) / (2 * den);  // round half up
          const bool tie = (2 * num) % den == 0 && ((2 * num) / den) % 2 == 1;
          const int got = out[(y * s + x) * c + ch];
          ++values;
          if (tie) {
            ++ties;
            EXPECT_TRUE(got == up || got == up - 1) << h << "x" << w << " -> " << s << " at " << y << "," << x;
          } else {
            ASSERT_EQ(got, up) << h << "x" << w << "x" << c << " -> " << s << " at " << y << "," << x << "," << ch;
          }
        }
      }
  }
  EXPECT_GT(values, 100000);
  EXPECT_GT(ties, 0);  // the 0/255 images put some values on a half grey level
}

// The two users of the taps agree: the loader's view of a whole square image
// enlarged to S (float, rounded half up) is prepare's enlargement of it
// (double, rounded half away from zero) within one grey level, equal almost
// everywhere.
TEST(Resize, TheLoadersWholeImageViewIsPreparesEnlargement) {
  const int64_t n = 13, S = 31, C = 3;
  std::vector<uint8_t> in(static_cast<size_t>(n * n * C));
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::vector<uint8_t> prepared(static_cast<size_t>(S * S * C)), view(static_cast<size_t>(C * S * S));
  resize_centre_crop(in.data(), n, n, C, S, prepared.data());
  const ViewParams whole{0, 0, static_cast<int16_t>(n), static_cast<int16_t>(n), 0};
  RenderPass p;
  p.pixels = in.data();
  p.views = &whole;
  p.serial = true;
  render_views(p, 1, n, n, C, S, view.data());
  int64_t differ = 0;
  for (int64_t y = 0; y < S; ++y)
    for (int64_t x = 0; x < S; ++x)
      for (int64_t ch = 0; ch < C; ++ch) {
        const int a = prepared[(y * S + x) * C + ch], b = view[(ch * S + y) * S + x];
        EXPECT_LE(std::abs(a - b), 1) << y << "," << x << "," << ch;
        differ += a != b;
      }
  EXPECT_LE(differ, S * S * C / 100) << differ << " of " << S * S * C << " values differ";
}
