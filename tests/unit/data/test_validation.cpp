// The validation split (data/validation.hpp): carved from the training split,
// disjoint from what trains, stratified, deterministic, recorded in the file,
// read by the loader and by the evaluation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/validation.hpp"
#include "fixtures.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

using namespace vitkd;

namespace {
// n samples of `row` bytes; sample i holds its index in its first 2 bytes (unique), label i % k
// except that class 0 gets every 7th sample too (unequal class sizes).
DatasetSplit numbered(int64_t n, int64_t row, int64_t k) {
  DatasetSplit s;
  s.images.assign(n * row, 0);
  s.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    s.images[i * row] = static_cast<uint8_t>(i & 0xff);
    s.images[i * row + 1] = static_cast<uint8_t>(i >> 8);
    s.labels[i] = static_cast<int32_t>(i % 7 == 0 ? 0 : i % k);
  }
  return s;
}
int64_t id_of(const DatasetSplit& s, int64_t j, int64_t row) {
  return s.images[j * row] | (int64_t(s.images[j * row + 1]) << 8);
}
}  // namespace

TEST(ValidationSplit, DisjointCompleteAndStratified) {
  const int64_t n = 1000, row = 4, k = 5;
  const DatasetSplit train = numbered(n, row, k);
  const ValCarve c = carve_validation(train, row, k, 0.1, 3);
  std::set<int64_t> in_train, in_val;
  for (int64_t j = 0; j < c.train.size(); ++j) in_train.insert(id_of(c.train, j, row));
  for (int64_t j = 0; j < c.val.size(); ++j) in_val.insert(id_of(c.val, j, row));
  EXPECT_EQ(in_train.size(), size_t(c.train.size())) << "a training sample twice";
  EXPECT_EQ(in_val.size(), size_t(c.val.size())) << "a validation sample twice";
  for (int64_t v : in_val) EXPECT_EQ(in_train.count(v), 0u) << "sample " << v << " both trains and validates";
  EXPECT_EQ(c.train.size() + c.val.size(), n) << "samples lost or invented";
  // Each class gives round(0.1 * n_k); labels travel with their images; source indices name them.
  for (int64_t cls = 0; cls < k; ++cls) {
    const int64_t n_k = std::count(train.labels.begin(), train.labels.end(), cls);
    const int64_t v_k = std::count(c.val.labels.begin(), c.val.labels.end(), cls);
    EXPECT_EQ(v_k, std::llround(0.1 * n_k)) << "class " << cls;
  }
  ASSERT_EQ(int64_t(c.val_source.size()), c.val.size());
  for (int64_t j = 0; j < c.val.size(); ++j) {
    EXPECT_EQ(id_of(c.val, j, row), c.val_source[j]);
    EXPECT_EQ(c.val.labels[j], train.labels[c.val_source[j]]);
  }
  EXPECT_TRUE(std::is_sorted(c.val_source.begin(), c.val_source.end())) << "the original order is kept";
}

TEST(ValidationSplit, DeterministicBySeedAndOtherSeedsDiffer) {
  const DatasetSplit train = numbered(600, 2, 3);
  const ValCarve a = carve_validation(train, 2, 3, 0.2, 1), b = carve_validation(train, 2, 3, 0.2, 1),
                 c = carve_validation(train, 2, 3, 0.2, 2);
  EXPECT_EQ(a.val_source, b.val_source);
  EXPECT_EQ(a.val.images, b.val.images);
  EXPECT_EQ(a.val_source.size(), c.val_source.size());
  EXPECT_NE(a.val_source, c.val_source) << "the seed chooses the samples";
  // Not the first samples of each class: a shuffled choice.
  EXPECT_NE(a.val_source.back() - a.val_source.front(), int64_t(a.val_source.size()) - 1);
}

TEST(ValidationSplit, FractionOutsideTheRangeIsOneLine) {
  const DatasetSplit train = numbered(100, 2, 2);
  for (double f : {0.0, -0.1, 0.51, 1.0, double(NAN)}) {
    try {
      carve_validation(train, 2, 2, f, 1);
      ADD_FAILURE() << "accepted --val-fraction " << f;
    } catch (const UserError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--val-fraction"), std::string::npos) << m;
      EXPECT_NE(m.find("(0, 0.5]"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  EXPECT_NO_THROW(carve_validation(train, 2, 2, 0.5, 1));
  EXPECT_THROW(carve_validation(numbered(4, 2, 4), 2, 4, 0.1, 1), UserError) << "an empty validation split";
}

TEST(ValidationSplit, WrittenRecordedAndReadByTheLoader) {
  const test::TempDir tmp;
  const int64_t row = 2 * 2 * 1;
  const DatasetSplit train = numbered(300, row, 3), test = numbered(50, row, 3);
  const ValCarve c = carve_validation(train, row, 3, 0.2, 9);
  const std::string path = tmp.path() + "/v.h5";
  write_dataset(path, c.train, test, 2, 2, 1, {"a", "b", "c"}, ValRecord{&c, 0.2, 9});
  const DatasetMeta m = validate_dataset(path);
  EXPECT_EQ(m.train_size, c.train.size());
  EXPECT_EQ(m.val_size, c.val.size());
  EXPECT_EQ(m.split_size("val"), c.val.size());
  EXPECT_EQ(m.test_size, 50);
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_open_read(path, "dataset");
    EXPECT_DOUBLE_EQ(h5_attr_double(f, "val_fraction"), 0.2);
    EXPECT_EQ(h5_attr_int(f, "val_seed"), 9);
    std::vector<int64_t> src;
    h5_read(f, "/val/source_indices", src);
    EXPECT_EQ(src, c.val_source);
  }
  // The loader reads /val, every sample once, and the training loader never sees one of them.
  LoaderOptions o;
  o.split = "val";
  o.shuffle = false;
  o.batch_size = 16;
  Loader val(m, o);
  val.begin_epoch(0);
  std::set<int64_t> seen;
  while (auto b = val.next())
    for (int64_t j = 0; j < b->size(); ++j) {
      const int64_t id = b->pixels[j * row] | (int64_t(b->pixels[j * row + 1]) << 8);
      seen.insert(id);
      EXPECT_EQ(b->labels[j], train.labels[id]);
    }
  EXPECT_EQ(seen, std::set<int64_t>(c.val_source.begin(), c.val_source.end()));
  o.split = "train";
  Loader tr(m, o);
  tr.begin_epoch(0);
  while (auto b = tr.next())
    for (int64_t j = 0; j < b->size(); ++j)
      EXPECT_EQ(seen.count(b->pixels[j * row] | (int64_t(b->pixels[j * row + 1]) << 8)), 0u);
  // A file without /val has val_size 0.
  write_dataset(tmp.path() + "/n.h5", train, test, 2, 2, 1, {"a", "b", "c"});
  EXPECT_EQ(validate_dataset(tmp.path() + "/n.h5").val_size, 0);
}
