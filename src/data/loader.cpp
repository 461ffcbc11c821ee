#include "data/loader.hpp"

#include <algorithm>
#include <exception>

#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"

namespace vitkd {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  if (!shuffle) return p;
  const uint64_t key = hash64(seed, 0x5045524dULL /* "PERM" */, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t r = hash64(key, static_cast<uint64_t>(i));
    const int64_t j = static_cast<int64_t>(uniform_below(r, static_cast<uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return p;
}

int64_t steps_per_epoch(int64_t n, int64_t g, bool drop_last) {
  return drop_last ? n / g : (n + g - 1) / g;
}

std::vector<int64_t> rank_slice(const std::vector<int64_t>& perm, int64_t step, int64_t g, int rank,
                                int world, int64_t* global_size) {
  const int64_t n = static_cast<int64_t>(perm.size());
  const int64_t begin = step * g;
  const int64_t r_total = std::max<int64_t>(0, std::min(g, n - begin));
  if (global_size) *global_size = r_total;
  const int64_t lo = begin + (rank * r_total) / world, hi = begin + ((rank + 1) * r_total) / world;
  std::vector<int64_t> out(perm.begin() + lo, perm.begin() + hi);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Rows `indices` (any order, repeats allowed) of the open datasets into `px`
// [n, row] and `lb` [n], in the order of `indices`: one sorted, coalesced read.
void read_rows_any_order(const SplitImages& images, hid_t labels, const std::vector<int64_t>& indices, int64_t row,
                         uint8_t* px, int32_t* lb) {
  std::vector<int64_t> rows(indices);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::vector<uint8_t> p(rows.size() * row);
  std::vector<int32_t> l(rows.size());
  images.read_decoded(rows, p.data());
  h5_read_rows(labels, rows, 1, l.data());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t at = static_cast<size_t>(std::lower_bound(rows.begin(), rows.end(), indices[k]) - rows.begin());
    std::copy(p.begin() + at * row, p.begin() + (at + 1) * row, px + k * row);
    lb[k] = l[at];
  }
}

}  // namespace

void read_partners(const SplitImages& images, hid_t labels, MixPairing& pairing, int64_t row, Batch& b) {
  const int64_t n = b.size();
  b.partner_indices = pairing.partners(b.epoch, b.indices);
  b.partner_labels.assign(static_cast<size_t>(n), 0);
  b.partner_pos.assign(static_cast<size_t>(n), -1);
  std::vector<std::pair<int64_t, int64_t>> at(static_cast<size_t>(n));  // (index, position), sorted
  for (int64_t k = 0; k < n; ++k) at[k] = {b.indices[k], k};
  std::sort(at.begin(), at.end());
  std::vector<int64_t> outside;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t j = b.partner_indices[k];
    const auto it = std::lower_bound(at.begin(), at.end(), std::make_pair(j, int64_t(-1)));
    if (it != at.end() && it->first == j) {
      b.partner_pos[k] = it->second;
      b.partner_labels[k] = b.labels[it->second];
    } else {
      outside.push_back(k);
    }
  }
  const int64_t m = static_cast<int64_t>(outside.size());
  std::vector<int64_t> idx(m);
  std::vector<int32_t> lb(m);
  for (int64_t j = 0; j < m; ++j) idx[j] = b.partner_indices[outside[j]];
  b.partner_pixels.resize(m * row);
  if (m > 0) read_rows_any_order(images, labels, idx, row, b.partner_pixels.data(), lb.data());
  for (int64_t j = 0; j < m; ++j) b.partner_labels[outside[j]] = lb[j];
}

ImageBatch Batch::images(const DatasetMeta& m) const {
  ImageBatch ib;
  ib.n = size(), ib.h = m.height, ib.w = m.width, ib.c = m.channels, ib.epoch = epoch;
  ib.pixels = pixels.data();
  ib.indices = indices.data();
  ib.labels = labels.data();
  if (!partner_indices.empty()) {
    ib.partner_indices = partner_indices.data();
    ib.partner_labels = partner_labels.data();
    ib.partner_pos = partner_pos.data();
    ib.partner_pixels = partner_pixels.data();
  }
  return ib;
}

Batch read_samples(const DatasetMeta& meta, const std::string& split,
                   const std::vector<int64_t>& indices, int64_t epoch, MixPairing* pairing) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t row = meta.height * meta.width * meta.channels;
  const int64_t size = meta.split_size(split);
  for (int64_t i : indices)
    if (i < 0 || i >= size)
      throw UserError("sample index " + std::to_string(i) + " is outside /" + split + " of " +
                      meta.path + " (" + std::to_string(size) + " samples); the checkpoint belongs "
                      "to another dataset");
  Batch b;
  b.epoch = epoch;
  b.global_size = n;
  b.indices = indices;
  b.pixels.resize(n * row);
  b.labels.resize(n);
  H5Lock lock(h5_mutex());
  H5Obj file = h5_open_read(meta.path, "dataset");
  SplitImages images(file, meta, split);
  H5Obj labels(VK_CHECK(H5, H5Dopen2(file, ("/" + split + "/labels").c_str(), H5P_DEFAULT)));
  read_rows_any_order(images, labels, indices, row, b.pixels.data(), b.labels.data());
  if (pairing) read_partners(images, labels, *pairing, row, b);
  return b;
}

Loader::Loader(const DatasetMeta& meta, const LoaderOptions& opt) : meta_(meta), opt_(opt) {
  n_ = meta.split_size(opt.split);
  row_elems_ = meta.height * meta.width * meta.channels;
  const int64_t g = opt.batch_size * opt.world;
  if (opt.drop_last && n_ < g)
    throw UserError(meta.path + ": split '" + opt.split + "' has " + std::to_string(n_) +
                    " samples, fewer than one global batch (" + std::to_string(opt.batch_size) +
                    " per rank x " + std::to_string(opt.world) +
                    " ranks); lower data.batch_size or use more data");
  steps_ = vitkd::steps_per_epoch(n_, g, opt.drop_last);
  if (opt.mix) pairing_.emplace(opt.mix_seed, n_);
  if (opt_.mpio) {
    H5Lock lock(h5_mutex());
    mpio_file_ = h5_open_parallel(meta_.path, /*write=*/false);  // collective
    mpio_images_ = SplitImages(mpio_file_, meta_, opt_.split);
    mpio_labels_ = H5Obj(VK_CHECK(H5, H5Dopen2(mpio_file_, ("/" + opt_.split + "/labels").c_str(), H5P_DEFAULT)));
    H5Obj fapl(VK_CHECK(H5, H5Fget_access_plist(mpio_file_)));
    if (VK_CHECK(H5, H5Pget_driver(fapl)) == H5FD_MPIO) io_mode_ = SampleIo::Mpio;
    return;
  }
  const int n_threads = opt_.transform ? std::max(1, opt_.threads) : 1;
  for (int t = 0; t < n_threads; ++t)
    threads_.emplace_back([this] {
      // An exception cannot cross the thread boundary: report it on the one error path.
      try {
        run();
      } catch (const UserError& e) {
        die(kExitUser, e.what());
      } catch (const std::exception& e) {
        die(kExitRuntime, std::string("data loader: ") + e.what());
      }
    });
}

Loader::~Loader() {
  if (opt_.mpio) {
    if (std::uncaught_exceptions() > 0) {  // the process is ending through die()
      mpio_labels_.release();
      mpio_images_.release();  // the file's datasets are left to the ending process
      mpio_file_.release();
      return;
    }
    H5Lock lock(h5_mutex());
    mpio_labels_.close();
    mpio_images_.close();
    mpio_file_.close();  // collective
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void Loader::begin_epoch(int64_t epoch, int64_t first_step) {
  std::lock_guard<std::mutex> l(mu_);
  epoch_ = epoch;
  next_step_ = first_step;
  want_step_ = first_step;
  if (opt_.mpio) return;  // read on demand by next()
  ready_.clear();
  ++generation_;
  cv_.notify_all();
}

std::optional<Batch> Loader::next() {
  if (opt_.mpio) {
    if (next_step_ >= steps_) return std::nullopt;
    Batch b = read_batch(mpio_images_, mpio_labels_, epoch_, next_step_++);
    if (opt_.transform) opt_.transform(b);
    return b;
  }
  std::unique_lock<std::mutex> l(mu_);
  if (want_step_ >= steps_) return std::nullopt;
  cv_.wait(l, [&] { return ready_.count(want_step_) > 0; });
  Batch b = std::move(ready_.at(want_step_));
  ready_.erase(want_step_++);
  cv_.notify_all();
  return b;
}

Batch Loader::read_batch(const SplitImages& images, hid_t labels, int64_t epoch, int64_t step) {
  Batch b;
  b.epoch = epoch;
  b.step = step;
  {
    std::lock_guard<std::mutex> l(perm_mu_);  // the loader threads share one permutation
    if (perm_epoch_ != epoch) {
      perm_ = epoch_permutation(n_, opt_.seed, epoch, opt_.shuffle);
      perm_epoch_ = epoch;
    }
    b.indices = rank_slice(perm_, step, opt_.batch_size * opt_.world, opt_.rank, opt_.world, &b.global_size);
  }
  b.pixels.resize(b.indices.size() * row_elems_);
  b.labels.resize(b.indices.size());
  EncodedRows enc;
  {
    H5Lock lock(h5_mutex());
    images.read(b.indices, b.pixels.data(), enc);
    h5_read_rows(labels, b.indices, 1, b.labels.data());
    if (pairing_) {
      std::lock_guard<std::mutex> l(perm_mu_);  // the pairing's permutation is shared too
      read_partners(images, labels, *pairing_, row_elems_, b);
    }
  }
  images.decode(enc, b.pixels.data());  // off the lock: loader threads decode in parallel
  return b;
}

void Loader::run() {
  H5Obj file, labels;
  SplitImages images;
  {
    H5Lock lock(h5_mutex());
    file = h5_open_read(meta_.path, "dataset");
    images = SplitImages(file, meta_, opt_.split);
    labels = H5Obj(VK_CHECK(H5, H5Dopen2(file, ("/" + opt_.split + "/labels").c_str(), H5P_DEFAULT)));
  }
  for (;;) {
    int64_t epoch, step, gen;
    {
      // Claim the next step while fewer than `prefetch` batches are ahead of next().
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] {
        return quit_ || (next_step_ < steps_ && next_step_ - want_step_ < opt_.prefetch);
      });
      if (quit_) break;
      epoch = epoch_;
      step = next_step_++;
      gen = generation_;
    }
    Batch b = read_batch(images, labels, epoch, step);
    if (opt_.transform) opt_.transform(b);
    std::lock_guard<std::mutex> l(mu_);
    if (gen != generation_) continue;  // the epoch was restarted meanwhile
    ready_.emplace(step, std::move(b));
    cv_.notify_all();
  }
  H5Lock lock(h5_mutex());
  labels.close();
  images.close();
  file.close();
}

}  // namespace vitkd
