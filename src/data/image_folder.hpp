#pragma once
// `vitkd prepare folder DIR --out FILE.h5 --size S [--test-fraction F]
//  [--seed N] [--channels 1|3]`: a dataset file (layout of data/dataset.hpp)
// from a folder of images, one subfolder per class:
//
//   DIR/<class name>/<any name>.png|.jpg|.jpeg     (extension case-insensitive)
//
// Classes are the subfolders in byte order of their names (label = position);
// hidden entries (".*") and files with other extensions are ignored. Files
// are decoded by their content (PNG signature: libpng; JPEG SOI: libjpeg-turbo),
// converted to C channels (RGB, or luminance for C = 1; alpha composited on
// black), resized so that the shorter side is S pixels (area average when
// shrinking, bilinear when enlarging: data/transforms/resize.hpp, the taps of
// the loader's views too), and centre-cropped to S x S.
//
// Split: per class, the files (sorted by name) are shuffled with a
// counter-based generator keyed on the seed and the class, and the first
// round(F * n) go to /test, the rest to /train; so the split depends only on
// the seed, F and the file names. In the file, samples are ordered by class,
// then by that shuffled order.
//
// Parallel over MPI ranks: rank 0 lists the folder and broadcasts the list;
// rank r decodes the r-th contiguous share of each split and writes its rows
// as a hyperslab with collective parallel HDF5; mean and std come from an
// allreduce of per-channel sums. A corrupt or unreadable file is reported
// (name and reason) and skipped; the count is printed at the end and stored
// as the root attribute `skipped` (int64), next to `source` (DIR). With
// `--store jpeg` each rank encodes its share and writes its bytes at its
// offset of the split's byte array (data/image_store.hpp).
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

struct FolderSpec {
  std::string dir;             ///< the image folder
  std::string out;             ///< output dataset file
  int64_t size = 0;            ///< S: output height = width in pixels
  int64_t channels = 3;        ///< 1 (luminance) or 3 (RGB)
  double test_fraction = 0.1;  ///< share of each class's files that goes to /test, in [0, 1)
  uint64_t seed = 1;
  /// > 0: a validation split carved from the decoded training split by the
  /// rule of data/validation.hpp (`--val-fraction`, `--val-seed`), as for the
  /// other prepare kinds; the mean and std are then the remaining training
  /// split's.
  double val_fraction = 0;
  uint64_t val_seed = 1;
  /// How the images are kept (`--store`): "raw" pixels, or "jpeg": each
  /// resized image encoded at `quality` (`--quality`, 1..100), the layout of
  /// data/image_store.hpp; mean and std are then those of the decoded JPEGs.
  std::string store = "raw";
  int quality = 90;
};

/// A decoded image: uint8 pixels [height, width, channels], row-major.
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

/// Decodes a PNG or JPEG file into `channels` (1 or 3) channels. Returns ""
/// on success, else the reason (unreadable, not PNG/JPEG, corrupt data).
std::string decode_image(const std::string& path, int64_t channels, Image& out);

/// Shorter side to `size` pixels, then the centred size x size crop
/// (resize_centre_crop() of data/transforms/resize.hpp).
Image resize_center_crop(const Image& in, int64_t size);

/// Runs `vitkd prepare folder` on every rank (collective).
void prepare_folder(const FolderSpec& spec);

}  // namespace vitkd
