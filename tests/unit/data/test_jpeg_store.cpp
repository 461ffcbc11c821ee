// The JPEG-stored dataset layout (data/image_store.hpp, data/jpeg_codec.hpp):
// the codec's round trip, a folder prepared with --store jpeg read back by
// every reader as the raw store's pixels within JPEG's error and as the
// encoder's own round trip bit for bit, and damaged files refused in one line.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "data/image_folder.hpp"
#include "data/image_store.hpp"
#include "data/jpeg_codec.hpp"
#include "data/loader.hpp"
#include "fixtures.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

using namespace vitkd;
using vitkd::test::TempDir;
using vitkd::test::user_error_of;

namespace {

// A smooth photo-like image [h, w, 3]: gradients and a disc whose place depends on `seed`.
std::vector<uint8_t> smooth_image(int64_t h, int64_t w, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  const double cy = h * (0.3 + 0.05 * (seed % 5)), cx = w * (0.6 - 0.04 * (seed % 7)), r = 0.25 * h;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        double v = 40 + 120.0 * (x + seed) / w + 50.0 * c * y / h;
        if ((y - cy) * (y - cy) + (x - cx) * (x - cx) < r * r) v = 60 + 60 * ((seed + c) % 3);
        px[(y * w + x) * 3 + c] = static_cast<uint8_t>(std::lround(std::fmin(255.0, v)));
      }
  return px;
}

// DIR/class{0,1}/i.jpg: 12 images of 48 x 40 per class, as JPEG files of quality 95.
void write_folder(const std::string& dir) {
  for (int k = 0; k < 2; ++k) {
    const std::string d = dir + "/class" + std::to_string(k);
    ASSERT_EQ(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, true);
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    for (int i = 0; i < 12; ++i) {
      const std::vector<uint8_t> px = smooth_image(40, 48, 13 * k + i);
      const std::vector<uint8_t> jpg = jpeg_encode(px.data(), 40, 48, 3, 95);
      std::ofstream(d + "/" + std::to_string(i) + ".jpg", std::ios::binary)
          .write(reinterpret_cast<const char*>(jpg.data()), static_cast<std::streamsize>(jpg.size()));
    }
  }
}

FolderSpec folder_spec(const std::string& dir, const std::string& out, const std::string& store) {
  FolderSpec fs;
  fs.dir = dir;
  fs.out = out;
  fs.size = 32;
  fs.test_fraction = 0.25;
  fs.store = store;
  fs.quality = 90;
  return fs;
}

std::vector<int64_t> all_indices(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST(JpegStore, CodecRoundTripIsCloseAndDeterministic) {
  const std::vector<uint8_t> px = smooth_image(64, 80, 3);
  const std::vector<uint8_t> jpg = jpeg_encode(px.data(), 64, 80, 3, 90);
  EXPECT_EQ(jpg, jpeg_encode(px.data(), 64, 80, 3, 90));  // the encoder is deterministic too
  EXPECT_LT(jpg.size(), px.size() / 5) << "a smooth image at quality 90 compresses 5x or more";
  std::vector<uint8_t> a(px.size()), b(px.size());
  ASSERT_EQ(jpeg_decode(jpg.data(), jpg.size(), 64, 80, 3, a.data()), "");
  ASSERT_EQ(jpeg_decode(jpg.data(), jpg.size(), 64, 80, 3, b.data()), "");
  EXPECT_EQ(a, b);
  double sum = 0;
  for (size_t i = 0; i < px.size(); ++i) sum += std::abs(int(a[i]) - int(px[i]));
  EXPECT_LT(sum / px.size(), 3.0) << "mean error in grey levels at quality 90";
  EXPECT_NE(jpeg_decode(jpg.data(), jpg.size(), 64, 64, 3, a.data()).find("80x64 pixels"), std::string::npos);
  EXPECT_NE(jpeg_decode(jpg.data(), 3, 64, 80, 3, a.data()), "");
}

TEST(JpegStore, EveryReaderGetsTheEncodersRoundTripOfTheRawStore) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  write_folder(t / "photos");
  prepare_folder(folder_spec(t / "photos", t / "raw.h5", "raw"));
  prepare_folder(folder_spec(t / "photos", t / "jpeg.h5", "jpeg"));
  const DatasetMeta raw = validate_dataset(t / "raw.h5"), jpg = validate_dataset(t / "jpeg.h5");
  EXPECT_EQ(raw.storage, "raw");
  ASSERT_EQ(jpg.storage, "jpeg");
  EXPECT_EQ(jpg.jpeg_quality, 90);
  ASSERT_EQ(jpg.train_size, raw.train_size);
  ASSERT_EQ(jpg.height, 32);
  const int64_t row = 32 * 32 * 3;
  for (const std::string split : {"train", "test"}) {
    const int64_t n = raw.split_size(split);
    const Batch r = read_samples(raw, split, all_indices(n), 0), j = read_samples(jpg, split, all_indices(n), 0);
    EXPECT_EQ(r.labels, j.labels);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      // Bit for bit the decoder's output for the encoder's bytes of the raw store's image.
      const std::vector<uint8_t> bytes = jpeg_encode(r.pixels.data() + i * row, 32, 32, 3, 90);
      std::vector<uint8_t> want(row);
      ASSERT_EQ(jpeg_decode(bytes.data(), bytes.size(), 32, 32, 3, want.data()), "");
      EXPECT_TRUE(std::equal(want.begin(), want.end(), j.pixels.begin() + i * row)) << split << " sample " << i;
      for (int64_t p = 0; p < row; ++p) sum += std::abs(int(r.pixels[i * row + p]) - int(j.pixels[i * row + p]));
    }
    EXPECT_GT(sum, 0) << "the JPEG store holds the raw pixels: not JPEG";
    EXPECT_LT(sum / (n * row), 4.0) << "mean error in grey levels at quality 90";
  }
  // The loader, serial (prefetch thread) and through MPI-IO, reads what read_samples reads.
  for (const bool mpio : {false, true}) {
    LoaderOptions o;
    o.batch_size = 5;
    o.seed = 3;
    o.mpio = mpio;
    Loader loader(jpg, o);
    loader.begin_epoch(1);
    int64_t seen = 0;
    while (auto b = loader.next()) {
      const Batch want = read_samples(jpg, "train", b->indices, 1);
      EXPECT_TRUE(b->pixels == want.pixels) << (mpio ? "mpio" : "serial") << " step " << b->step;
      EXPECT_EQ(b->labels, want.labels);
      seen += b->size();
    }
    EXPECT_EQ(seen, jpg.train_size);
  }
}

TEST(JpegStore, DamagedFilesAreRefusedInOneLine) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  write_folder(t / "photos");
  prepare_folder(folder_spec(t / "photos", t / "jpeg.h5", "jpeg"));
  const DatasetMeta m = validate_dataset(t / "jpeg.h5");
  // Sample 4's bytes overwritten past its header: the read names the sample.
  std::vector<int64_t> off;
  {
    H5Lock lock(h5_mutex());
    H5Obj f(H5Fopen((t / "jpeg.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    h5_read(f, "/train/jpeg_offsets", off);
    H5Obj d(H5Dopen2(f, "/train/jpeg", H5P_DEFAULT));
    const int64_t from = off[4] + (off[5] - off[4]) / 2;
    std::vector<uint8_t> junk(static_cast<size_t>(off[5] - from), 0xFF);
    h5_write_slab(d.get(), from, static_cast<int64_t>(junk.size()), junk.data(), false);
    // Sample 6 without its end marker: libjpeg only warns (premature end), still an error here.
    const uint8_t zeros[2] = {0, 0};
    h5_write_slab(d.get(), off[7] - 2, 2, zeros, false);
  }
  const std::string e = user_error_of([&] { read_samples(m, "train", {3, 4}, 0); });
  EXPECT_NE(e.find("the JPEG bytes of /train sample 4 do not decode"), std::string::npos) << e;
  EXPECT_NE(e.find("jpeg.h5"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(user_error_of([&] { read_samples(m, "train", {3, 5}, 0); }), "") << "other samples still read";
  const std::string w = user_error_of([&] { read_samples(m, "train", {6}, 0); });
  EXPECT_NE(w.find("/train sample 6 do not decode (libjpeg: "), std::string::npos) << w;
  // Offsets that go backwards: validation names the dataset and the entry.
  {
    H5Lock lock(h5_mutex());
    H5Obj f(H5Fopen((t / "jpeg.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Obj d(H5Dopen2(f, "/test/jpeg_offsets", H5P_DEFAULT));
    const int64_t back = 1;
    h5_write_slab(d.get(), 2, 1, &back, false);
  }
  const std::string v = user_error_of([&] { validate_dataset(t / "jpeg.h5"); });
  EXPECT_NE(v.find("/test/jpeg_offsets[2] = 1 is not an offset"), std::string::npos) << v;
}

TEST(JpegStore, StoreAndQualityOutsideTheirRangesAreRefused) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  write_folder(t / "photos");
  FolderSpec fs = folder_spec(t / "photos", t / "x.h5", "png");
  EXPECT_NE(user_error_of([&] { prepare_folder(fs); }).find("--store 'png' is not a storage"), std::string::npos);
  fs.store = "jpeg";
  fs.quality = 101;
  EXPECT_NE(user_error_of([&] { prepare_folder(fs); }).find("--quality 101 is outside 1..100"), std::string::npos);
  fs.quality = 90;
  fs.val_fraction = 0.2;
  EXPECT_NE(user_error_of([&] { prepare_folder(fs); }).find("--val-fraction is not available with --store jpeg"),
            std::string::npos);
}
