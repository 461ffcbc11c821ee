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

Batch read_samples(const DatasetMeta& meta, const std::string& split,
                   const std::vector<int64_t>& indices, int64_t epoch) {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t row = meta.height * meta.width * meta.channels;
  const int64_t size = meta.split_size(split);
  for (int64_t i : indices)
    if (i < 0 || i >= size)
      throw UserError("sample index " + std::to_string(i) + " is outside /" + split + " of " +
                      meta.path + " (" + std::to_string(size) + " samples); the checkpoint belongs "
                      "to another dataset");
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  std::vector<int64_t> sorted(n);
  for (int64_t i = 0; i < n; ++i) sorted[i] = indices[order[i]];
  std::vector<uint8_t> px(n * row);
  std::vector<int32_t> lb(n);
  {
    H5Lock lock(h5_mutex());
    H5Obj file = h5_open_read(meta.path, "dataset");
    H5Obj images(VK_CHECK(H5, H5Dopen2(file, ("/" + split + "/images").c_str(), H5P_DEFAULT)));
    H5Obj labels(VK_CHECK(H5, H5Dopen2(file, ("/" + split + "/labels").c_str(), H5P_DEFAULT)));
    h5_read_rows(images, sorted, row, px.data());
    h5_read_rows(labels, sorted, 1, lb.data());
  }
  Batch b;
  b.epoch = epoch;
  b.global_size = n;
  b.indices = indices;
  b.pixels.resize(n * row);
  b.labels.resize(n);
  for (int64_t k = 0; k < n; ++k) {
    std::copy(px.begin() + k * row, px.begin() + (k + 1) * row, b.pixels.begin() + order[k] * row);
    b.labels[order[k]] = lb[k];
  }
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
  if (opt_.mpio) {
    H5Lock lock(h5_mutex());
    mpio_file_ = h5_open_parallel(meta_.path, /*write=*/false);  // collective
    mpio_images_ = H5Obj(VK_CHECK(H5, H5Dopen2(mpio_file_, ("/" + opt_.split + "/images").c_str(), H5P_DEFAULT)));
    mpio_labels_ = H5Obj(VK_CHECK(H5, H5Dopen2(mpio_file_, ("/" + opt_.split + "/labels").c_str(), H5P_DEFAULT)));
    H5Obj fapl(VK_CHECK(H5, H5Fget_access_plist(mpio_file_)));
    if (VK_CHECK(H5, H5Pget_driver(fapl)) == H5FD_MPIO) io_mode_ = "mpio";
    return;
  }
  thread_ = std::thread([this] {
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
      mpio_images_.release();
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
  if (thread_.joinable()) thread_.join();
}

void Loader::begin_epoch(int64_t epoch, int64_t first_step) {
  std::lock_guard<std::mutex> l(mu_);
  if (opt_.mpio) {  // read on demand by next()
    epoch_ = epoch;
    next_step_ = first_step;
    return;
  }
  queue_.clear();
  epoch_ = epoch;
  next_step_ = first_step;
  producing_ = true;
  epoch_done_ = false;
  ++generation_;
  cv_.notify_all();
}

std::optional<Batch> Loader::next() {
  if (opt_.mpio) {
    if (next_step_ >= steps_) return std::nullopt;
    return read_batch(mpio_images_, mpio_labels_, epoch_, next_step_++);
  }
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !queue_.empty() || epoch_done_; });
  if (queue_.empty()) return std::nullopt;
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  if (queue_.empty() && !producing_) epoch_done_ = true;
  cv_.notify_all();
  return b;
}

Batch Loader::read_batch(hid_t images, hid_t labels, int64_t epoch, int64_t step) {
  if (perm_epoch_ != epoch) {
    perm_ = epoch_permutation(n_, opt_.seed, epoch, opt_.shuffle);
    perm_epoch_ = epoch;
  }
  Batch b;
  b.epoch = epoch;
  b.step = step;
  b.indices = rank_slice(perm_, step, opt_.batch_size * opt_.world, opt_.rank, opt_.world, &b.global_size);
  b.pixels.resize(b.indices.size() * row_elems_);
  b.labels.resize(b.indices.size());
  H5Lock lock(h5_mutex());
  h5_read_rows(images, b.indices, row_elems_, b.pixels.data());
  h5_read_rows(labels, b.indices, 1, b.labels.data());
  return b;
}

void Loader::run() {
  H5Obj file, images, labels;
  {
    H5Lock lock(h5_mutex());
    file = h5_open_read(meta_.path, "dataset");
    images = H5Obj(VK_CHECK(H5, H5Dopen2(file, ("/" + opt_.split + "/images").c_str(), H5P_DEFAULT)));
    labels = H5Obj(VK_CHECK(H5, H5Dopen2(file, ("/" + opt_.split + "/labels").c_str(), H5P_DEFAULT)));
  }
  for (;;) {
    int64_t epoch, step, gen;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] {
        return quit_ || (producing_ && static_cast<int64_t>(queue_.size()) < opt_.prefetch);
      });
      if (quit_) break;
      epoch = epoch_;
      step = next_step_;
      gen = generation_;
      if (step >= steps_) {
        producing_ = false;
        if (queue_.empty()) epoch_done_ = true;
        cv_.notify_all();
        continue;
      }
    }
    Batch b = read_batch(images, labels, epoch, step);
    std::lock_guard<std::mutex> l(mu_);
    if (gen != generation_) continue;  // the epoch was restarted meanwhile
    queue_.push_back(std::move(b));
    next_step_ = step + 1;
    cv_.notify_all();
  }
  H5Lock lock(h5_mutex());
  labels.close();
  images.close();
  file.close();
}

}  // namespace vitkd
