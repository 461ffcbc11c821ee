#pragma once
// The vitkd dataset file (HDF5), its validation, and `vitkd prepare`.
//
// Layout (format "vitkd-dataset", version 1):
//   /train/images  uint8  [N, H, W, C]   pixels 0..255, row-major, channels last
//   /train/labels  int32  [N]            class index in [0, num_classes)
//   /test/images, /test/labels           the same for the test split
//   /val/images, /val/labels             optional: a validation split carved from
//   /val/source_indices int64 [M]        the training split by `vitkd prepare
//                                        --val-fraction` (data/validation.hpp);
//                                        each sample's index in the uncarved train split
//   attributes on "/":
//     format         string  "vitkd-dataset"
//     format_version int64   1
//     class_names    string[K]
//     mean, std      float64[C]  per-channel statistics of /train/images,
//                                in units of pixel/255 (so roughly 0..1)
//     val_fraction float64, val_seed int64, val_rule string: with /val only
// A JPEG-stored file (version 2, `prepare folder --store jpeg`) keeps each
// split's images as JPEG bytes instead: data/image_store.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "io/h5.hpp"

namespace vitkd {

constexpr const char* kDatasetFormat = "vitkd-dataset";
constexpr int64_t kDatasetVersion = 1;
constexpr H5Format kDatasetH5{kDatasetFormat, kDatasetVersion, "dataset",
                              "create the file with `vitkd prepare`"};

/// What a validated dataset file holds (no pixel data).
struct DatasetMeta {
  std::string path;
  int64_t height = 0, width = 0, channels = 0;  ///< image shape (pixels)
  int64_t num_classes = 0;                      ///< == class_names.size()
  int64_t train_size = 0, test_size = 0;        ///< samples per split
  int64_t val_size = 0;                         ///< 0: the file has no /val split
  std::vector<std::string> class_names;         ///< [K]
  std::vector<double> mean, std;                ///< [C], pixel/255 units
  std::string storage = "raw";                  ///< "raw" or "jpeg" (data/image_store.hpp)
  int64_t jpeg_quality = 0;                     ///< JPEG-stored: the encoder's quality, 1..100
  /// Samples in "train", "val" or "test" (0 for any other name).
  int64_t split_size(const std::string& split) const {
    return split == "train" ? train_size : split == "test" ? test_size : split == "val" ? val_size : 0;
  }
};

/// Opens and checks the layout above: groups, ranks, dtypes, matching sizes,
/// non-empty splits, labels in range, attributes. Every problem is a
/// UserError naming the file and dataset. Reads all labels (to range-check).
DatasetMeta validate_dataset(const std::string& path);

/// Collective: rank 0 alone opens and validates the file (validate_dataset)
/// and broadcasts the result, so a job of many ranks touches the file's
/// metadata once, not once per rank. The same UserError on every rank when
/// the file is bad.
DatasetMeta validate_dataset_collective(const std::string& path);

/// In-memory split, for writing (prepare) and for small tests.
struct DatasetSplit {
  std::vector<uint8_t> images;  ///< [N, H, W, C]
  std::vector<int32_t> labels;  ///< [N]
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

/// Writes a dataset file in the layout above (mean/std computed from train).
/// Written to `path`.tmp then renamed, so a failure leaves no half file.
void write_dataset(const std::string& path, const DatasetSplit& train, const DatasetSplit& test,
                   int64_t height, int64_t width, int64_t channels,
                   const std::vector<std::string>& class_names);

struct ValRecord;  // data/validation.hpp
/// The same with the validation split of `val` (none when val.carve is null):
/// `train` is then the carve's remaining training split.
void write_dataset(const std::string& path, const DatasetSplit& train, const DatasetSplit& test,
                   int64_t height, int64_t width, int64_t channels,
                   const std::vector<std::string>& class_names, const ValRecord& val);

/// Per-channel mean and std in pixel/255 units from per-channel sums of v and
/// v^2 (v = pixel/255) over `count` pixels per channel (as write_dataset does).
void channel_mean_std(const std::vector<double>& sum, const std::vector<double>& sq, double count,
                      std::vector<double>& mean, std::vector<double>& sd);

/// Writes the root attributes of the layout (format, format_version,
/// class_names, mean, std) into an existing HDF5 file (opened serially).
void write_dataset_attributes(const std::string& path, const std::vector<std::string>& class_names,
                              const std::vector<double>& mean, const std::vector<double>& sd);

/// Reads one split of IDX files (gzip'ed or plain) as Fashion-MNIST ships them.
DatasetSplit read_idx_pair(const std::string& images_path, const std::string& labels_path);

/// Options of `vitkd prepare synthetic`.
struct SyntheticSpec {
  int64_t train = 2048, test = 512;  ///< samples per split
  int64_t size = 16;                 ///< H = W in pixels
  int64_t channels = 1;
  int64_t classes = 4;
  uint64_t seed = 1;
};
/// Learnable class-dependent images: each class has a fixed random template
/// (smooth blobs); a sample is its class template, shifted by up to 2 pixels,
/// plus noise. Deterministic in the seed.
void make_synthetic(const SyntheticSpec& spec, DatasetSplit& train, DatasetSplit& test);

}  // namespace vitkd
