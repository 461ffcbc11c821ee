// The dataset file (data/dataset.hpp): written, validated and read back; its
// layout errors named in one line; image folders resized, centre-cropped and decoded.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>

#include "data/dataset.hpp"
#include "data/image_folder.hpp"
#include "data_fixtures.hpp"
#include "fixtures.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

using namespace vitkd;
using vitkd::test::small_split;

namespace {
std::string validation_error(const std::string& path) {
  try {
    validate_dataset(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Dataset, WrittenDatasetValidatesAndReadsBackExactly) {
  const test::TempDir tmp;
  const std::string p = tmp / "rt.h5";
  DatasetSplit tr, te;
  small_split(tr, 100, 4 * 4 * 2, 3);
  small_split(te, 10, 4 * 4 * 2, 3);
  write_dataset(p, tr, te, 4, 4, 2, {"a", "b", "c"});
  DatasetMeta m = validate_dataset(p);
  EXPECT_EQ(m.train_size, 100);
  EXPECT_EQ(m.test_size, 10);
  EXPECT_EQ(m.height, 4);
  EXPECT_EQ(m.channels, 2);
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"a", "b", "c"}));
  double expect_mean = 0;
  for (auto v : tr.images) expect_mean += v / 255.0;
  expect_mean /= tr.images.size();
  EXPECT_NEAR(m.mean[0], expect_mean, 1e-9);
  // Coalesced hyperslab reads return exactly the requested rows, in order.
  H5Obj f = h5_open_read(p, "dataset");
  H5Obj d(H5Dopen2(f, "/train/images", H5P_DEFAULT));
  std::vector<int64_t> rows{3, 4, 5, 17, 40, 41, 99};
  std::vector<uint8_t> out(rows.size() * 32);
  h5_read_rows(d.get(), rows, 32, out.data());
  for (size_t r = 0; r < rows.size(); ++r)
    for (int j = 0; j < 32; ++j) ASSERT_EQ(out[r * 32 + j], tr.images[rows[r] * 32 + j]);
  std::remove(p.c_str());
}

TEST(Dataset, ScatteredRowWritesLandOnTheirRowsOnly) {
  const test::TempDir tmp;
  const std::string p = tmp / "rows.h5";
  H5Obj f = h5_create(p);
  H5Obj d = h5_create_dataset_chunked(f, "/x", H5T_NATIVE_FLOAT, {10, 3}, 4);
  std::vector<float> zero(30, 0.0f), got(30);
  h5_write_slab(d.get(), 0, 10, zero.data(), false);
  const std::vector<int64_t> rows{1, 2, 5, 9};  // runs and single rows, across chunks
  std::vector<float> v(rows.size() * 3);
  for (size_t q = 0; q < v.size(); ++q) v[q] = 1.0f + float(q);
  h5_write_rows(d.get(), rows, 3, v.data());
  h5_write_rows(d.get(), std::vector<int64_t>{}, 3, v.data());  // nothing
  EXPECT_THROW(h5_write_rows(d.get(), std::vector<int64_t>{5, 1}, 3, v.data()), RuntimeError);
  h5_read_slab(d.get(), 0, 10, got.data());
  for (int64_t r = 0, q = 0; r < 10; ++r) {
    const bool written = q < 4 && rows[q] == r;
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[r * 3 + j], written ? v[q * 3 + j] : 0.0f) << r << "," << j;
    q += written;
  }
}

TEST(Dataset, ValidationNamesTheProblem) {
  const test::TempDir tmp;
  const std::string p = tmp / "bad.h5";
  DatasetSplit tr, te;
  small_split(tr, 20, 16, 2);
  small_split(te, 5, 16, 2);
  // Labels out of range: 3 classes in the data, 2 names.
  for (auto& l : tr.labels) l = 2;
  write_dataset(p, tr, te, 4, 4, 1, {"a", "b"});
  EXPECT_NE(validation_error(p).find("out of range"), std::string::npos) << validation_error(p);
  EXPECT_NE(validation_error(p).find("/train/labels[0]"), std::string::npos);
  // Empty split.
  DatasetSplit empty;
  small_split(tr, 20, 16, 2);
  write_dataset(p, tr, empty, 4, 4, 1, {"a", "b"});
  EXPECT_NE(validation_error(p).find("split 'test' is empty"), std::string::npos) << validation_error(p);
  // Wrong dtype: labels as float.
  {
    H5Obj f = h5_create(p);
    h5_attr_write(f, "format", std::string(kDatasetFormat));
    h5_attr_write(f, "format_version", kDatasetVersion);
    h5_attr_write(f, "class_names", std::vector<std::string>{"a", "b"});
    std::vector<uint8_t> img(2 * 16, 0);
    std::vector<float> lab{0, 1};
    h5_write(f, "/train/images", img.data(), {2, 4, 4, 1});
    h5_write(f, "/train/labels", lab.data(), {2});
  }
  EXPECT_NE(validation_error(p).find("'/train/labels' is float32 [2], expected int32 [N]"), std::string::npos)
      << validation_error(p);
  // Not HDF5 at all / missing.
  {
    FILE* fp = std::fopen(p.c_str(), "w");
    std::fputs("not hdf5", fp);
    std::fclose(fp);
  }
  EXPECT_NE(validation_error(p).find("not a valid HDF5 file"), std::string::npos);
  std::remove(p.c_str());
  EXPECT_NE(validation_error(p).find("cannot read dataset"), std::string::npos);
}

TEST(Dataset, LayoutErrorsReportedByHdf5AreUserErrors) {
  // Each of these used to end the process through VK_CHECK (or, for a
  // string array, write past a buffer); now it is one UserError naming the
  // file and the object.
  const test::TempDir tmp;
  const std::string p = tmp / "layout.h5";
  DatasetSplit tr, te;
  small_split(tr, 70000, 1, 2);
  small_split(te, 3, 1, 2);
  tr.labels[69999] = 7;  // in the second block of the bounded label check
  write_dataset(p, tr, te, 1, 1, 1, {"a", "b"});
  EXPECT_NE(validation_error(p).find("label 7 at /train/labels[69999]"), std::string::npos)
      << validation_error(p);
  small_split(tr, 30, 1, 2);
  write_dataset(p, tr, te, 1, 1, 1, {"a", "b"});
  EXPECT_EQ(validation_error(p), "");
  auto edit = [&](auto&& fn) {
    H5Obj f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    fn(f.get());
  };
  edit([](hid_t f) { h5_attr_write(f, "format_version", std::string("1")); });
  EXPECT_NE(validation_error(p).find(p + ": HDF5 attribute 'format_version' must be an integer"),
            std::string::npos) << validation_error(p);
  edit([](hid_t f) {
    h5_attr_write(f, "format_version", kDatasetVersion);
    h5_attr_write(f, "format", std::vector<std::string>{kDatasetFormat, "x"});
  });
  EXPECT_NE(validation_error(p).find("attribute 'format' must be a single string"), std::string::npos)
      << validation_error(p);
  edit([](hid_t f) {
    h5_attr_write(f, "format", std::string(kDatasetFormat));
    h5_attr_write(f, "class_names", std::string("a"));
  });
  EXPECT_NE(validation_error(p).find("'class_names' must be an array of variable-length strings"),
            std::string::npos) << validation_error(p);
  edit([](hid_t f) {
    h5_attr_write(f, "class_names", std::vector<std::string>{"a", "b"});
    h5_attr_write(f, "mean", std::string("x"));
  });
  EXPECT_NE(validation_error(p).find("'mean' must be an array of numbers"), std::string::npos)
      << validation_error(p);
  edit([](hid_t f) {
    h5_attr_write(f, "mean", std::vector<double>{0.5});
    ASSERT_GE(H5Ldelete(f, "/test/images", H5P_DEFAULT), 0);
    h5_group(f, "/test/images");
  });
  EXPECT_NE(validation_error(p).find("'/test/images' is not a readable dataset (unable to open dataset"),
            std::string::npos) << validation_error(p);
  std::remove(p.c_str());
}

// ---- image folders: resize + centre crop, decoding errors ------------------------

namespace {
Image gray_image(int64_t h, int64_t w, const std::function<int(int64_t, int64_t)>& f) {
  Image im;
  im.height = h;
  im.width = w;
  im.channels = 1;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) im.pixels.push_back(static_cast<uint8_t>(f(y, x)));
  return im;
}
}  // namespace

TEST(ImageFolder, ShrinkingAveragesAreas) {
  // 4x4 of 2x2 blocks (10, 50 / 90, 200) -> 2x2: each output pixel is one block.
  auto in = gray_image(4, 4, [](int64_t y, int64_t x) { return (y < 2 ? 10 : 90) + (x < 2 ? 0 : 40 + (y >= 2) * 70); });
  Image out = resize_center_crop(in, 2);
  ASSERT_EQ(out.pixels.size(), 4u);
  EXPECT_EQ(out.pixels[0], 10);
  EXPECT_EQ(out.pixels[1], 50);
  EXPECT_EQ(out.pixels[2], 90);
  EXPECT_EQ(out.pixels[3], 200);
  // A 1-pixel checkerboard shrunk by 2 averages to (0 + 255) / 2, rounded.
  auto cb = gray_image(6, 6, [](int64_t y, int64_t x) { return ((y + x) % 2) * 255; });
  for (uint8_t v : resize_center_crop(cb, 3).pixels) EXPECT_EQ(v, 128);
}

TEST(ImageFolder, ScalesTheShorterSideThenCropsTheCentre) {
  // 4 rows x 12 columns, column index as value; S = 4: no scaling of the
  // shorter side, the crop keeps columns 4..7.
  auto in = gray_image(4, 12, [](int64_t, int64_t x) { return int(x * 10); });
  Image out = resize_center_crop(in, 4);
  ASSERT_EQ(out.height, 4);
  ASSERT_EQ(out.width, 4);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(out.pixels[y * 4 + x], (x + 4) * 10) << y << "," << x;
  // Enlarging a constant image keeps it constant (bilinear weights sum to 1).
  auto c = gray_image(3, 5, [](int64_t, int64_t) { return 77; });
  for (uint8_t v : resize_center_crop(c, 7).pixels) EXPECT_EQ(v, 77);
}

TEST(ImageFolder, DecodeErrorsAreReasonsNotExceptions) {
  Image im;
  EXPECT_NE(decode_image("/nonexistent/x.png", 3, im).find("cannot open"), std::string::npos);
  const test::TempDir tmp;
  const std::string p = tmp / "garbage.jpg";
  FILE* f = std::fopen(p.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fputs("GIF89a not really", f);
  std::fclose(f);
  EXPECT_NE(decode_image(p, 3, im).find("not a PNG or JPEG file"), std::string::npos);
  f = std::fopen(p.c_str(), "wb");
  const unsigned char soi[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10};  // a JPEG that stops at once
  std::fwrite(soi, 1, sizeof soi, f);
  std::fclose(f);
  EXPECT_NE(decode_image(p, 3, im).find("JPEG"), std::string::npos);
  std::remove(p.c_str());
}
