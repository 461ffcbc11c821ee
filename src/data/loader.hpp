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
// Reading. Background threads read ahead up to `prefetch` batches. A rank's
// samples are sorted and read with one H5Dread of coalesced hyperslabs. With
// LoaderOptions::transform unset, one thread does only I/O (it never
// computes), so it does not compete with the compute threads for cores, and
// the transform runs on the main thread (data/transforms/transforms.hpp).
// With it set (data.loader_threads >= 1), `threads` threads each claim the
// next global batch, read it (reads are serialized by the HDF5 lock) and
// transform it, and next() hands the batches out in step order: the step
// waits only when the loader is slower than the step.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.hpp"
#include "data/image_store.hpp"
#include "data/transforms/transforms.hpp"
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
  /// With mixing (LoaderOptions::mix), empty otherwise: sample k's partner
  /// (MixPairing): its split index [n], label [n], position in this batch
  /// or -1 [n], and the pixels of the m partners not in the batch [m, H, W,
  /// C] (ImageBatch).
  std::vector<int64_t> partner_indices;
  std::vector<int32_t> partner_labels;
  std::vector<int64_t> partner_pos;
  std::vector<uint8_t> partner_pixels;
  /// Filled by a loader thread (LoaderOptions::transform): the model's input
  /// [n, C, S, S] and, with mixing, the mixed labels [n, K].
  /// With grey-level transfer (InputTransfer::Uint8) the input is x8, the
  /// views' grey levels [n, C, S, S], and x stays empty.
  bool transformed = false;
  std::vector<float> x, y_soft;
  std::vector<uint8_t> x8;
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
  /// The batch as the transforms read it (partners included when present).
  ImageBatch images(const DatasetMeta& m) const;
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
  /// Mixup / CutMix on: every batch also carries each sample's partner
  /// (MixPairing of mix_seed, the augmentation's seed), read with it.
  bool mix = false;
  uint64_t mix_seed = 0;
  /// Runs on the loader threads after each read (Batch::x, y_soft,
  /// transformed): the training transform, off the compute thread. Unset:
  /// the loader only reads, on one thread.
  std::function<void(Batch&)> transform;
  int threads = 1;  ///< loader threads when `transform` is set (>= 1)
};

/// Reads the samples `indices` (any order) of `split` on the calling thread
/// (sorted, coalesced reads); the Batch keeps the order of `indices`. Used to
/// refill sifting's sample pool from a checkpoint. With `pairing`, the
/// partners of `epoch` are read too.
Batch read_samples(const DatasetMeta& meta, const std::string& split,
                   const std::vector<int64_t>& indices, int64_t epoch, MixPairing* pairing = nullptr);

/// Fills b's partner fields (b.indices, b.labels and b.epoch set), reading
/// the partners not in the batch from the open `images` and `labels` of its
/// split (JPEG decoded here); the caller holds the HDF5 lock.
void read_partners(const SplitImages& images, hid_t labels, MixPairing& pairing, int64_t row_elems, Batch& b);

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
  /// How this rank reads the samples, as found, not as asked: Mpio when the
  /// open file's access property list has HDF5's MPI-IO driver
  /// (H5Pget_driver), Serial otherwise (result.json's data_io).
  SampleIo io_mode() const { return io_mode_; }

 private:
  void run();
  /// Rank's share of global batch `step` of `epoch` from the open datasets.
  /// JPEG-stored images are decoded after the HDF5 lock is released.
  Batch read_batch(const SplitImages& images, hid_t labels, int64_t epoch, int64_t step);

  DatasetMeta meta_;
  LoaderOptions opt_;
  int64_t n_ = 0, steps_ = 0, row_elems_ = 0;
  std::vector<int64_t> perm_;  ///< the permutation of epoch perm_epoch_
  int64_t perm_epoch_ = -1;
  std::optional<MixPairing> pairing_;  ///< with LoaderOptions::mix
  H5Obj mpio_file_, mpio_labels_;  ///< data.io = "mpio" only
  SplitImages mpio_images_;
  SampleIo io_mode_ = SampleIo::Serial;

  std::vector<std::thread> threads_;
  std::mutex mu_, perm_mu_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;  ///< read (and transformed) batches by step
  int64_t epoch_ = -1;
  int64_t next_step_ = 0;           ///< the next step a thread claims
  int64_t want_step_ = 0;           ///< the next step next() hands out
  int64_t generation_ = 0;          ///< bumped by begin_epoch(): older batches are dropped
  bool quit_ = false;
};

}  // namespace vitkd
