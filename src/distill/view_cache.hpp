#pragma once
// Teacher-view cache: the teacher's sparse targets for replayable augmented
// views, computed once by `vitkd teacher-cache CONFIG.toml` and replayed by
// any number of students (distill.teacher_cache = true), which then run no
// teacher at all (FKD, Shen & Xing 2022; TinyViT, Wu et al. 2022).
//
// A view is a pure function of (cache seed, epoch, sample index)
// (data/transforms/transforms.hpp). The file records, for E epochs x N training samples,
// each view's crop box and flip flag and the teacher's top-k soft targets
// p = softmax(t / tau) (k classes with the largest p, in decreasing order)
// with the residual mass 1 - sum(top-k p), which the reader spreads evenly
// over the other K - k classes, so that every target is a distribution.
// Student epoch e replays cached epoch e (epoch 0 for every epoch when the
// cache was written without augmentation: its views never change); training
// beyond the cached epochs is refused at start-up.
//
// File: format "vitkd-teacher-views", version 1. Rows are views, row
// r = e * N + i for epoch e and sample i; every dataset is chunked in blocks
// of 16384 rows, and a student reads one epoch's rows (a contiguous block) at
// the first step of each epoch:
//   /views/crop        int16   [E*N, 4]  top, left, height, width (pixels; ViewParams)
//   /views/flip        uint8   [E*N]     1 = mirrored left-right after the crop
//   /targets/class     uint16  [E*N, k]  class indices, largest p first
//   /targets/prob      float32 [E*N, k]  p of those classes
//   /targets/residual  float32 [E*N]     1 - sum of the k probabilities (>= 0)
//   attributes: format, format_version, epochs, train_size, top_k, classes,
//     seed, augment (0/1), crop_pad, flip, temperature, height, width,
//     transform (transform_text(): written since 0.4.5, compared; a file
//     without it holds pad crops at the stored size), image_size (the
//     views' output side; since 0.4.5, else the stored size),
//     channels, mean, std, dataset (path), teacher (Teacher::describe()),
//     teacher_id (Teacher::identity(); written since 0.4.1, compared when present),
//     teacher_test_top1 (the teacher's own test top-1; written since 0.4.2, for information).
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/transforms/transforms.hpp"
#include "data/dataset.hpp"

namespace vitkd {

class Teacher;

/// What a cache was written for. A run may use a cache only when the dataset
/// (its shape, size, classes and per-channel statistics), the teacher, the
/// augmentation setting and the temperature match.
struct ViewCacheKey {
  std::string dataset;     ///< data.path (for messages; not compared)
  int64_t train_size = 0, height = 0, width = 0, channels = 0, classes = 0;
  std::vector<double> mean, std;
  std::string teacher;     ///< Teacher::describe() (for messages)
  std::string teacher_id;  ///< Teacher::identity() (compared; a file without one compares `teacher`)
  bool augment = false;
  int64_t crop_pad = 0;
  bool flip = false;
  std::string transform;   ///< transform_text() of the views (compared)
  int64_t image_size = 0;  ///< output side of the views (model.image_size)
  double temperature = 1;  ///< tau of the stored soft targets
  double teacher_test_top1 = -1;  ///< the teacher's own test top-1 (for information; not compared; -1 unknown)
};

ViewCacheKey view_cache_key(const DatasetMeta& meta, const Teacher& teacher, const AugmentSpec& aug,
                            double temperature);

/// The format name of an existing HDF5 file at `path` ("" if it has none or
/// cannot be read): tells a view cache from the unaugmented logit cache.
std::string cache_file_format(const std::string& path);

/// The format name of a teacher-view cache ("vitkd-teacher-views").
const char* view_cache_format();

/// `vitkd inspect` of a teacher-view cache: what it was written for (data,
/// teacher, augmentation, temperature), its size, and the first epoch's
/// mean top-1 teacher probability and residual mass. Several lines.
std::string summarize_view_cache(const std::string& path);

/// A cache file opened for replay (every rank its own copy, read-only).
class ViewCache {
 public:
  /// Opens `path` and checks it against `want`: a UserError naming the
  /// file and the first mismatch otherwise, or the file when it is truncated
  /// or not a view cache.
  ViewCache(const std::string& path, const ViewCacheKey& want);

  const std::string& path() const { return path_; }
  int64_t epochs() const { return epochs_; }  ///< E
  int64_t top_k() const { return k_; }
  uint64_t seed() const { return seed_; }     ///< the run.seed the views came from
  bool augmented() const { return augment_; }
  int64_t image_size() const { return image_size_; }  ///< the views' output side
  /// The cached epoch student epoch `epoch` replays (`epoch` itself, 0 without augmentation).
  int64_t cached_epoch(int64_t epoch) const { return augment_ ? epoch : 0; }
  /// The views of samples `indices` (split indices) in student epoch `epoch`.
  std::vector<ViewParams> views(int64_t epoch, const std::vector<int64_t>& indices);
  /// Soft targets float32 [m, K] (rows sum to 1) for samples `idx` (int64 [m]) in student epoch `epoch`.
  torch::Tensor targets(int64_t epoch, const torch::Tensor& idx);

  int64_t hits() const { return hits_; }              ///< samples served (this rank)
  double read_seconds() const { return read_s_; }     ///< time spent reading epochs from the file
  int64_t file_bytes() const { return file_bytes_; }
  std::string describe() const;  ///< one line for the log

 private:
  void load(int64_t cached_epoch);  ///< reads one epoch's rows into memory

  std::string path_;
  int64_t n_ = 0, classes_ = 0, k_ = 0, epochs_ = 0, file_bytes_ = 0;
  uint64_t seed_ = 0;
  bool augment_ = false;
  int64_t image_size_ = 0;         ///< output side of the views
  int64_t loaded_ = -1;            ///< cached epoch in memory
  std::vector<int16_t> crop_;      ///< [N, 4]
  std::vector<uint8_t> flip_;      ///< [N]
  std::vector<uint16_t> class_;    ///< [N, k]
  std::vector<float> prob_, residual_;  ///< [N, k], [N]
  int64_t hits_ = 0;
  double read_s_ = 0;
};

/// What write_view_cache() did.
struct ViewCacheWritten {
  int64_t views = 0;          ///< E * N
  int64_t teacher_forwards = 0;  ///< samples the teacher ran on (all ranks)
  int64_t top_k = 0;          ///< after clamping
  int64_t bytes = 0;          ///< file size
  double seconds = 0;         ///< wall time of the teacher passes and writes
};

/// Collective: runs `teacher` over `epochs` epochs' views (seed aug.seed) of
/// every training sample and writes the cache to `path` (parallel HDF5,
/// through path.tmp and a rename). The teacher runs on the batches a training
/// run of `batch` samples per rank on these ranks (and run.seed = aug.seed)
/// hands it: each epoch's permutation in global batches of batch x ranks,
/// each rank its slice (data/loader.hpp rank_slice), the last partial batch
/// too, with the same mixing partners and inputs; every row goes to its
/// (epoch, sample) row of the file. So such a run replays exactly the
/// teacher's outputs it would compute live, in fp32 too, where the CPU's
/// products round a row by its batch. `k` is clamped to the class count
/// (with one warning on rank 0).
ViewCacheWritten write_view_cache(const std::string& path, const ViewCacheKey& key, Teacher& teacher,
                                  const DatasetMeta& meta, const AugmentSpec& aug, int64_t epochs,
                                  int64_t k, int64_t batch);

}  // namespace vitkd
