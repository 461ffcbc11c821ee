#pragma once
// Teacher-logit cache (distill.teacher_cache = true).
//
// Without augmentation a sample's input is the same every epoch, so the
// teacher's logits for it are too: they are computed once (the first time the
// sample is trained, or selected with sift.criterion = "kd") and looked up
// afterwards, so later epochs run no teacher at all.
//
// Every rank holds the whole table (float32 [N, K] plus a filled flag per
// sample: 2.4 MB for Fashion-MNIST). Newly computed rows are shared each step
// by one small allgather of (index, K logits) per sample, so all ranks can
// serve any sample of any later permutation.
//
// File (format "vitkd-teacher-logits", version 1), written by rank 0 at the
// end of a run and on preemption, read at start-up when its attributes match
// (dataset path and train size, classes, the teacher's description):
//   /logits  float32 [N, K]   full logits (not top-k: K is small here)
//   /filled  uint8   [N]      1 where the row holds the teacher's logits
//   attributes: format, format_version, dataset, train_size, classes, teacher
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

class TeacherCache {
 public:
  /// An empty cache for `n` samples of `classes` logits; `teacher` identifies
  /// the teacher (Teacher::describe()) and `dataset` the data file.
  TeacherCache(int64_t n, int64_t classes, std::string teacher, std::string dataset);

  /// Logits [m, K] for sample indices `idx` [m] (int64) if every one is
  /// cached; an undefined tensor otherwise.
  torch::Tensor lookup(const torch::Tensor& idx) const;
  /// Collective (every rank, every time): stores this rank's freshly computed
  /// rows (`idx` [m], `logits` [m, K]; m may be 0 or the tensors undefined)
  /// and every other rank's.
  void share(const torch::Tensor& idx, const torch::Tensor& logits);

  int64_t filled() const { return filled_; }
  int64_t size() const { return n_; }
  int64_t hits() const { return hits_; }  ///< samples served from the cache (this rank)

  /// Rank 0: writes the file atomically. Returns false if nothing is cached.
  bool save(const std::string& path) const;
  /// Every rank: loads `path` if it exists and matches; returns what it did
  /// as one line for the log.
  std::string load(const std::string& path);

 private:
  int64_t n_, k_;
  std::string teacher_, dataset_;
  std::vector<float> logits_;   ///< [n, k]
  std::vector<uint8_t> have_;   ///< [n]
  int64_t filled_ = 0;
  mutable int64_t hits_ = 0;
};

}  // namespace vitkd
