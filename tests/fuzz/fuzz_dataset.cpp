// libFuzzer target: dataset layout validation (validate_dataset).
// The input bytes mutate a valid dataset layout (root attributes, groups,
// datasets with rank/shape/dtype, labels); the result is written as a real
// HDF5 file in /dev/shm and validated. Property: accept or throw UserError /
// RuntimeError; on accept, the returned metadata satisfies the layout's rules.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "data/dataset.hpp"
#include "fuzz_common.hpp"
#include "h5_spec.hpp"
#include "io/h5.hpp"

using namespace vitkd;
using namespace vitkd::fuzz;

namespace {

FileSpec valid_dataset() {
  FileSpec s;
  s.attrs["format"] = str_value(kDatasetFormat);
  s.attrs["format_version"] = int_value(kDatasetVersion);
  s.attrs["class_names"] = strs_value({"a", "b", "c"});
  s.attrs["mean"] = reals_value({0.5});
  s.attrs["std"] = reals_value({0.25});
  s.nodes["/train/images"] = dataset(Type::UInt8, {4, 2, 2, 1}, {0, 17, 255});
  s.nodes["/train/labels"] = dataset(Type::Int32, {4}, {0, 1, 2, 1});
  s.nodes["/test/images"] = dataset(Type::UInt8, {2, 2, 2, 1}, {3});
  s.nodes["/test/labels"] = dataset(Type::Int32, {2}, {2, 0});
  return s;
}

const std::vector<std::string> kAttrs = {"format", "format_version", "class_names", "mean", "std"};
const std::vector<std::string> kPaths = {"/train", "/test", "/train/images", "/train/labels",
                                         "/test/images", "/test/labels"};
const std::vector<int64_t> kInts = {-1, 0, 1, 2, 3, 4, 255, 256, INT32_MAX, INT32_MIN,
                                    int64_t(INT32_MAX) + 1, INT64_MAX, INT64_MIN};
const std::vector<double> kReals = {0.0, -0.0, 0.25, 1.0, -1.0, 1e-300, 1e300,
                                    NAN, INFINITY, -INFINITY};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h5_silence_errors();  // as vitkd does at start-up
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("dataset");
  FileSpec spec = valid_dataset();
  Bytes in(data, size);
  mutate(spec, in, kAttrs, kPaths, kInts, kReals);
  if (!write_h5(spec, path)) return 0;
  DatasetMeta m;
  const bool ok = accepts([&] { m = validate_dataset(path); });
  // An unmodified template must be accepted: the target still reaches past
  // the first checks.
  if (size == 0 && !ok) finding("the valid template dataset was rejected");
  if (ok) {
    if (m.num_classes < 2 || m.num_classes != static_cast<int64_t>(m.class_names.size()))
      finding("accepted a dataset with fewer than 2 classes");
    if (m.train_size < 1 || m.test_size < 1) finding("accepted an empty split");
    if (m.height < 1 || m.width < 1 || m.channels < 1) finding("accepted an empty image shape");
    if (static_cast<int64_t>(m.mean.size()) != m.channels ||
        static_cast<int64_t>(m.std.size()) != m.channels)
      finding("accepted mean/std of the wrong length");
    for (double s : m.std)
      if (!(s > 0) || !std::isfinite(s)) finding("accepted a non-positive std");
  }
  std::remove(path.c_str());
  return 0;
}
