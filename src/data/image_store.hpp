#pragma once
// How a dataset file stores its images (data/dataset.hpp), and the one
// reader every sample reader uses (the loader, read_samples, the teacher-view
// cache): raw pixels or JPEG bytes, decoded to the same [n, H, W, C] pixels.
//
// JPEG-stored layout (format "vitkd-dataset", version 2; `vitkd prepare
// folder --store jpeg`), per split in place of /<split>/images:
//   /<split>/jpeg          uint8 [B]      the split's JPEG files back to back
//   /<split>/jpeg_offsets  int64 [N + 1]  sample i is bytes [off[i], off[i+1]);
//                                         off[0] = 0, off[N] = B, ascending
//   attributes on "/": storage "jpeg", jpeg_quality int64 (1..100),
//   image_height, image_width, image_channels int64 (the decoded shape)
// Raw files (version 1) have no `storage` attribute, or "raw".
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"
#include "io/h5.hpp"

namespace vitkd {

constexpr const char* kStorageRaw = "raw";
constexpr const char* kStorageJpeg = "jpeg";
constexpr int64_t kDatasetJpegVersion = 2;
constexpr H5Format kDatasetJpegH5{kDatasetFormat, kDatasetJpegVersion, "dataset",
                                  "create the file with `vitkd prepare folder --store jpeg`"};

/// The format header a dataset file must carry, chosen by its
/// format_version attribute (1: raw, 2: JPEG-stored); the check itself is
/// h5_require_format's.
const H5Format& dataset_format_of(hid_t file);

/// Checks a JPEG-stored split's datasets (dtypes, ranks, N + 1 offsets,
/// ascending from 0 to B) and returns its images' dims {N, H, W, C} from
/// the root attributes. UserError naming the file and dataset otherwise.
std::vector<int64_t> check_jpeg_split(hid_t file, const std::string& path, const std::string& split);

/// The bytes of some rows of a JPEG-stored split, read but not decoded.
struct EncodedRows {
  std::vector<int64_t> rows;    ///< [n] sample indices, ascending
  std::vector<int64_t> starts;  ///< [n + 1] row k is bytes [starts[k], starts[k+1]) of `bytes`
  std::vector<uint8_t> bytes;   ///< the rows' JPEG files back to back
};

/// One split's images in an open dataset file, raw or JPEG.
class SplitImages {
 public:
  SplitImages() = default;
  /// Opens /<split>/images, or /<split>/jpeg and its offsets. The caller
  /// holds the HDF5 lock.
  SplitImages(hid_t file, const DatasetMeta& meta, const std::string& split);
  bool jpeg() const { return jpeg_; }
  /// Reads rows `rows` (ascending, distinct) with one H5Dread; the caller
  /// holds the HDF5 lock. Raw: the pixels [n, H, W, C] into `out`. JPEG:
  /// the rows' offsets (one H5Dread), then their bytes into `enc` (one
  /// more), for decode().
  void read(const std::vector<int64_t>& rows, uint8_t* out, EncodedRows& enc) const;
  /// Decodes what read() left in `enc` into `out` [n, H, W, C] (nothing for
  /// raw); needs no lock. A sample whose bytes do not decode is a UserError
  /// (not collective: one rank finds it) naming the file, split and index.
  void decode(const EncodedRows& enc, uint8_t* out) const;
  /// read() and decode() in one (under the caller's HDF5 lock).
  void read_decoded(const std::vector<int64_t>& rows, uint8_t* out) const;
  void close() { offsets_.close(), data_.close(); }  ///< under the HDF5 lock
  void release() { offsets_.release(), data_.release(); }  ///< as H5Obj::release

 private:
  std::string path_, split_;
  bool jpeg_ = false;
  int64_t h_ = 0, w_ = 0, c_ = 0;
  H5Obj data_;     ///< /<split>/images (raw) or /<split>/jpeg
  H5Obj offsets_;  ///< JPEG: /<split>/jpeg_offsets
};

/// Writes one JPEG-stored split into a file created with the MPI-IO driver
/// (collective: every rank calls it). This rank's `sizes` [n] images, whose
/// bytes lie back to back in `bytes`, are samples [first, first + n) of
/// `total`; `byte_first` and `byte_total` are the same in bytes.
void write_jpeg_split(hid_t file, const std::string& split, int64_t first, int64_t total, int64_t byte_first,
                      int64_t byte_total, const std::vector<int64_t>& sizes, const std::vector<uint8_t>& bytes);

/// The root attributes of the JPEG-stored layout (storage, quality, shape)
/// and its format version, over what write_dataset_attributes wrote.
void write_jpeg_attributes(hid_t file, int64_t h, int64_t w, int64_t c, int64_t quality);

}  // namespace vitkd
