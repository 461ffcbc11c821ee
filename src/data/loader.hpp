#pragma once
// Sharded, prefetching batch loader over a vitkd dataset file.
//
// Sample order. Every epoch, all ranks derive one global permutation of the
// split from (seed, epoch) (Fisher-Yates driven by a counter-based hash, so it
// is the same on every platform). Global batch s is the slice
// perm[s*G, min((s+1)*G, N)) with G = batch_size * world_size, and rank r
// takes the sub-slice [r*R/P, (r+1)*R/P) of a global batch of R samples. The
// sequence of global batches depends only on (seed, epoch, G): 3 ranks x 4
// samples see the same samples per step as 1 rank x 12.
//
// Remainder. When N is not a multiple of G the last global batch holds
// R = N mod G samples, split as evenly as the formula above gives (ranks may
// differ by one sample, and a rank may get none when R < P). The trainer
// weights each rank's loss by its share so the update equals the mean over the
// R samples. With drop_last the remainder is skipped instead (the skipped
// samples differ every epoch because the permutation does).
//
// Reading. One background thread reads ahead up to `prefetch` batches into a
// bounded queue. A rank's samples are sorted and read with one H5Dread of
// coalesced hyperslabs. The thread only does I/O (it never computes), so it
// does not compete with the compute threads for cores; normalization and
// augmentation run on the main thread (data/transforms/transforms.hpp).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.hpp"
#include "io/h5.hpp"

namespace vitkd {

/// The global permutation of [0, n) for (seed, epoch); identity if !shuffle.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle = true);

/// Global batches per epoch for n samples and global batch g.
int64_t steps_per_epoch(int64_t n, int64_t g, bool drop_last);

/// Rank `rank`'s sample indices (sorted ascending) at step `step` of an epoch
/// with permutation `perm`; see the header comment. `global_size` receives R.
std::vector<int64_t> rank_slice(const std::vector<int64_t>& perm, int64_t step, int64_t g,
                                int rank, int world, int64_t* global_size = nullptr);

/// One rank's share of one global batch, raw pixels.
struct Batch {
  int64_t epoch = 0;             ///< epoch the batch belongs to (0-based)
  int64_t step = 0;              ///< global batch number within the epoch
  int64_t global_size = 0;       ///< R: samples in the whole global batch
  std::vector<int64_t> indices;  ///< [n] sample indices in the split, ascending
  std::vector<uint8_t> pixels;   ///< [n, H, W, C] as stored
  std::vector<int32_t> labels;   ///< [n]
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

struct LoaderOptions {
  std::string split = "train";  ///< "train", "val" or "test"
  int64_t batch_size = 64;      ///< per rank
  uint64_t seed = 0;
  bool shuffle = true;
  bool drop_last = false;
  int64_t prefetch = 4;         ///< queue depth (batches)
  int rank = 0, world = 1;
  /// data.io = "mpio": all ranks open the file once, collectively, through
  /// MPI-IO (parallel HDF5) when the loader is made, and each batch is read
  /// with independent transfers on the calling thread when next() asks for it
  /// (no prefetch thread: MPI is initialised for the main thread only). The
  /// loaders of all ranks must be made and destroyed in the same order.
  bool mpio = false;
};

/// Reads the samples `indices` (any order) of `split` on the calling thread
/// (sorted, coalesced reads); the Batch keeps the order of `indices`. Used to
/// refill sifting's sample pool from a checkpoint.
Batch read_samples(const DatasetMeta& meta, const std::string& split,
                   const std::vector<int64_t>& indices, int64_t epoch);

class Loader {
 public:
  Loader(const DatasetMeta& meta, const LoaderOptions& opt);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// Starts producing the batches of `epoch`, from global batch `first_step`.
  void begin_epoch(int64_t epoch, int64_t first_step = 0);
  /// The next batch of the current epoch (blocks until it is read), or
  /// nothing when the epoch is exhausted.
  std::optional<Batch> next();
  /// Global batches per epoch.
  int64_t steps_per_epoch() const { return steps_; }
  int64_t split_size() const { return n_; }
  const std::string& split_name() const { return opt_.split; }
  /// How this rank reads the samples, as found, not as asked: "mpio" when the
  /// open file's access property list has HDF5's MPI-IO driver
  /// (H5Pget_driver), "serial" otherwise (result.json's data_io).
  const std::string& io_mode() const { return io_mode_; }

 private:
  void run();
  /// Rank's share of global batch `step` of `epoch` from the open datasets.
  Batch read_batch(hid_t images, hid_t labels, int64_t epoch, int64_t step);

  DatasetMeta meta_;
  LoaderOptions opt_;
  int64_t n_ = 0, steps_ = 0, row_elems_ = 0;
  std::vector<int64_t> perm_;  ///< the permutation of epoch perm_epoch_
  int64_t perm_epoch_ = -1;
  H5Obj mpio_file_, mpio_images_, mpio_labels_;  ///< data.io = "mpio" only
  std::string io_mode_ = "serial";

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  int64_t epoch_ = -1, next_step_ = 0, generation_ = 0;
  bool producing_ = false, epoch_done_ = true, quit_ = false;
};

}  // namespace vitkd
