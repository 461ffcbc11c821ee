#include "distill/view_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/world.hpp"
#include "data/image_store.hpp"
#include "data/loader.hpp"
#include "data/tensors.hpp"
#include "distill/loss.hpp"
#include "distill/teacher.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/timing.hpp"

namespace vitkd {
namespace {

constexpr H5Format kViewsH5{"vitkd-teacher-views", 1, "teacher-view cache",
                            "write it again with `vitkd teacher-cache CONFIG.toml`"};
constexpr int64_t kChunkRows = 16384;  // rows per chunk: a student reads one epoch (N rows) at a time

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

std::string shape_text(int64_t n, int64_t h, int64_t w, int64_t c) {
  return std::to_string(n) + " train samples of " + std::to_string(h) + "x" + std::to_string(w) + "x" +
         std::to_string(c);
}

// The transform a cache file was written with: its "transform" attribute,
// or, in files written before 0.4.5, the pad crop at the stored size its
// augment, crop_pad and flip attributes describe.
std::string file_transform(hid_t f, int64_t h, int64_t w) {
  if (h5_attr_exists(f, "transform")) return h5_attr_string(f, "transform");
  AugmentSpec legacy;
  legacy.enabled = h5_attr_int(f, "augment") != 0;
  legacy.crop = CropKind::Pad;
  legacy.pad = h5_attr_int(f, "crop_pad");
  legacy.flip = h5_attr_int(f, "flip") != 0;
  return transform_text(legacy, h, w);
}

std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

ViewCacheKey view_cache_key(const DatasetMeta& meta, const Teacher& teacher, const AugmentSpec& aug,
                            double temperature) {
  ViewCacheKey k;
  k.dataset = meta.path;
  k.train_size = meta.train_size;
  k.height = meta.height;
  k.width = meta.width;
  k.channels = meta.channels;
  k.classes = meta.num_classes;
  k.mean = meta.mean;
  k.std = meta.std;
  k.teacher = teacher.describe();
  k.teacher_id = teacher.identity();
  k.augment = aug.enabled;
  k.crop_pad = aug.enabled ? aug.pad : 0;
  k.flip = aug.enabled && aug.flip;
  k.transform = transform_text(aug, meta.height, meta.width);
  k.image_size = output_side(aug, meta.height);
  k.temperature = temperature;
  return k;
}

const char* view_cache_format() { return kViewsH5.name; }

std::string summarize_view_cache(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "teacher-view cache");
  h5_require_format(f, path, kViewsH5);
  const int64_t E = h5_attr_int(f, "epochs"), n = h5_attr_int(f, "train_size"), k = h5_attr_int(f, "top_k");
  char b[1024];
  std::string out = path + ": vitkd teacher-view cache (format version " +
                    std::to_string(h5_attr_int(f, "format_version")) + ")\n";
  std::snprintf(b, sizeof b, "  %lld epoch(s) of views of %lld samples (seed %lld; %s), top-%lld of %lld classes at tau %s\n",
                (long long)E, (long long)n, (long long)h5_attr_int(f, "seed"),
                file_transform(f, h5_attr_int(f, "height"), h5_attr_int(f, "width")).c_str(), (long long)k,
                (long long)h5_attr_int(f, "classes"), number_text(h5_attr_double(f, "temperature")).c_str());
  out += b;
  out += "  dataset: " + h5_attr_string(f, "dataset") + " (" +
         shape_text(n, h5_attr_int(f, "height"), h5_attr_int(f, "width"), h5_attr_int(f, "channels")) + ")\n";
  out += "  teacher: " + h5_attr_string(f, "teacher") + "\n";
  out += "  teacher identity: " +
         (h5_attr_exists(f, "teacher_id") ? h5_attr_string(f, "teacher_id")
                                          : std::string("not recorded (written before 0.4.1): matched by description")) +
         "\n";
  if (h5_attr_exists(f, "teacher_test_top1")) {
    std::snprintf(b, sizeof b, "  teacher's test top-1: %.4f\n", h5_attr_double(f, "teacher_test_top1"));
    out += b;
  }
  const int64_t bytes = file_size(path);
  std::snprintf(b, sizeof b, "  %lld views, %.1f MB (%.1f bytes per view)\n", (long long)(E * n), bytes / 1e6,
                E * n > 0 ? double(bytes) / double(E * n) : 0.0);
  out += b;
  // The first epoch's targets: how sure the teacher is, how much the top-k leave out.
  if (n > 0 && k > 0) {
    std::vector<float> prob(static_cast<size_t>(n * k)), res(static_cast<size_t>(n));
    h5_read_slab(H5Obj(VK_CHECK(H5, H5Dopen2(f, "/targets/prob", H5P_DEFAULT))), 0, n, prob.data());
    h5_read_slab(H5Obj(VK_CHECK(H5, H5Dopen2(f, "/targets/residual", H5P_DEFAULT))), 0, n, res.data());
    double top = 0, rest = 0;
    for (int64_t i = 0; i < n; ++i) {
      top += prob[static_cast<size_t>(i * k)];
      rest += res[static_cast<size_t>(i)];
    }
    std::snprintf(b, sizeof b, "  epoch 0: mean top-1 teacher probability %.4f, mean residual mass %.2e\n",
                  top / double(n), rest / double(n));
    out += b;
  }
  return out;
}

std::string cache_file_format(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) return "";
  H5Lock lock(h5_mutex());
  try {
    H5Obj f = h5_open_read(path, "teacher cache");
    return h5_attr_exists(f, "format") ? h5_attr_string(f, "format") : "";
  } catch (const UserError&) {
    return "";
  }
}

namespace {

// The settings of a transform text (transform_text(): "key = value, ...",
// values possibly bracketed lists) by key.
std::map<std::string, std::string> transform_settings(const std::string& text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '[') ++depth;
    if (i < text.size() && text[i] == ']') --depth;
    if (i == text.size() || (depth == 0 && text.compare(i, 2, ", ") == 0)) {
      const std::string item = text.substr(start, i - start);
      const size_t eq = item.find(" = ");
      if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 3);
      start = i + 2;
    }
  }
  return out;
}

// The keys whose values differ between the cache's transform and the run's,
// e.g. "data.crop_pad = 2 in the cache, 1 here".
std::string transform_difference(const std::string& cache, const std::string& run) {
  const auto a = transform_settings(cache), b = transform_settings(run);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::string d;
  for (const auto& k : keys) {
    const std::string va = a.count(k) ? a.at(k) : "unset", vb = b.count(k) ? b.at(k) : "unset";
    if (va != vb) d += (d.empty() ? "" : "; ") + k + " = " + va + " in the cache, " + vb + " here";
  }
  return d.empty() ? "written for " + cache + ", this run has " + run : d;
}

}  // namespace

ViewCache::ViewCache(const std::string& path, const ViewCacheKey& want) : path_(path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "teacher-view cache");
  h5_require_format(f, path, kViewsH5);
  const std::string fix = "; write one for this configuration with `vitkd teacher-cache CONFIG.toml`, or "
                          "point distill.teacher_cache_file at the cache written for it";
  auto mismatch = [&](const std::string& what, const std::string& file_has, const std::string& run_has) {
    throw UserError(path + ": teacher-view cache for another " + what + " (written for " + file_has +
                    ", this run has " + run_has + ")" + fix);
  };
  classes_ = h5_attr_int(f, "classes");
  if (classes_ != want.classes)
    mismatch("number of classes", std::to_string(classes_) + " classes", std::to_string(want.classes));
  const int64_t n = h5_attr_int(f, "train_size"), h = h5_attr_int(f, "height"), w = h5_attr_int(f, "width"),
                c = h5_attr_int(f, "channels");
  const std::vector<double> mean = h5_attr_doubles(f, "mean"), stdv = h5_attr_doubles(f, "std");
  if (n != want.train_size || h != want.height || w != want.width || c != want.channels || mean != want.mean ||
      stdv != want.std)
    mismatch("dataset", h5_attr_string(f, "dataset") + ": " + shape_text(n, h, w, c),
             "data.path " + want.dataset + ": " + shape_text(want.train_size, want.height, want.width, want.channels) +
                 (n == want.train_size && h == want.height && w == want.width && c == want.channels
                      ? ", other pixel statistics"
                      : ""));
  // The teacher's identity (model and weights), wherever its file lies;
  // files written before it existed compare the description.
  const std::string teacher = h5_attr_string(f, "teacher");
  if (h5_attr_exists(f, "teacher_id") ? h5_attr_string(f, "teacher_id") != want.teacher_id : teacher != want.teacher)
    mismatch("teacher model", teacher, want.teacher);
  augment_ = h5_attr_int(f, "augment") != 0;
  const std::string transform = file_transform(f, h, w);
  if (transform != want.transform)
    throw UserError(path + ": teacher-view cache for another augmentation setting (" +
                    transform_difference(transform, want.transform) + ")" + fix);
  image_size_ = h5_attr_exists(f, "image_size") ? h5_attr_int(f, "image_size") : h;
  const double tau = h5_attr_double(f, "temperature");
  if (tau != want.temperature)
    mismatch("temperature", "distill.temperature = " + number_text(tau),
             "distill.temperature = " + number_text(want.temperature));
  epochs_ = h5_attr_int(f, "epochs");
  k_ = h5_attr_int(f, "top_k");
  seed_ = static_cast<uint64_t>(h5_attr_int(f, "seed"));
  n_ = n;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expect = {
      {"/views/crop", {epochs_ * n_, 4}}, {"/views/flip", {epochs_ * n_}},
      {"/targets/class", {epochs_ * n_, k_}}, {"/targets/prob", {epochs_ * n_, k_}},
      {"/targets/residual", {epochs_ * n_}}};
  if (epochs_ < 1 || k_ < 1 || k_ > classes_)
    throw UserError(path + ": teacher-view cache has epochs = " + std::to_string(epochs_) + ", top_k = " +
                    std::to_string(k_) + " for " + std::to_string(classes_) + " classes (corrupt); " +
                    kViewsH5.fix);
  for (const auto& [name, dims] : expect) {
    const H5DatasetInfo info = h5_dataset_info(f, name);
    if (info.dims != dims)
      throw UserError(path + ": " + name + " is " + info.describe() + ", expected " +
                      std::to_string(dims[0]) + " rows for " + std::to_string(epochs_) + " epochs x " +
                      std::to_string(n_) + " samples (corrupt); " + kViewsH5.fix);
  }
  file_bytes_ = file_size(path);
}

std::string ViewCache::describe() const {
  char b[512];
  std::snprintf(b, sizeof b,
                "teacher-view cache %s: %lld epoch(s) x %lld samples, top-%lld of %lld classes, views of "
                "seed %llu%s, %.1f MB; no teacher forward passes",
                path_.c_str(), (long long)epochs_, (long long)n_, (long long)k_, (long long)classes_,
                (unsigned long long)seed_, augment_ ? "" : " (unaugmented: epoch 0 replays every epoch)",
                file_bytes_ / 1e6);
  return b;
}

void ViewCache::load(int64_t e) {
  if (e == loaded_) return;
  if (e < 0 || e >= epochs_)
    throw UserError(path_ + ": epoch " + std::to_string(e + 1) + " is past the " + std::to_string(epochs_) +
                    " cached epochs of views; write a longer cache (distill.cache_epochs) or lower train.epochs");
  const auto t0 = Clock::now();
  crop_.resize(n_ * 4);
  flip_.resize(n_);
  class_.resize(n_ * k_);
  prob_.resize(n_ * k_);
  residual_.resize(n_);
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_open_read(path_, "teacher-view cache");
    auto slab = [&](const char* name, auto* out) {
      H5Obj d(VK_CHECK(H5, H5Dopen2(f, name, H5P_DEFAULT)));
      h5_read_slab(d, e * n_, n_, out);
    };
    slab("/views/crop", crop_.data());
    slab("/views/flip", flip_.data());
    slab("/targets/class", class_.data());
    slab("/targets/prob", prob_.data());
    slab("/targets/residual", residual_.data());
  }
  for (int64_t i = 0; i < n_ * k_; ++i)
    if (class_[i] >= classes_)
      throw UserError(path_ + ": /targets/class holds class " + std::to_string(class_[i]) + " of " +
                      std::to_string(classes_) + " (corrupt); " + kViewsH5.fix);
  loaded_ = e;
  read_s_ += seconds_since(t0);
}

std::vector<ViewParams> ViewCache::views(int64_t epoch, const std::vector<int64_t>& indices) {
  load(cached_epoch(epoch));
  std::vector<ViewParams> out(indices.size());
  for (size_t j = 0; j < indices.size(); ++j) {
    const int64_t i = indices[j];
    if (i < 0 || i >= n_) throw RuntimeError("view cache: sample index out of range");
    const int16_t* c = crop_.data() + i * 4;
    out[j] = ViewParams{c[0], c[1], c[2], c[3], flip_[i]};
  }
  return out;
}

torch::Tensor ViewCache::targets(int64_t epoch, const torch::Tensor& idx) {
  load(cached_epoch(epoch));
  const int64_t m = idx.numel();
  const auto ic = idx.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t* ip = ic.data_ptr<int64_t>();
  auto out = torch::empty({m, classes_}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  const int64_t others = classes_ - k_;
  for (int64_t j = 0; j < m; ++j) {
    const int64_t i = ip[j];
    if (i < 0 || i >= n_) throw RuntimeError("view cache: sample index out of range");
    float* row = o + j * classes_;
    const float rest = others > 0 ? std::max(0.0f, residual_[i]) / static_cast<float>(others) : 0.0f;
    std::fill(row, row + classes_, rest);
    for (int64_t q = 0; q < k_; ++q) row[class_[i * k_ + q]] = prob_[i * k_ + q];
  }
  hits_ += m;
  return out;
}

namespace {

// The file's root attributes: what the cache was written for.
void write_view_attributes(hid_t f, const ViewCacheKey& key, int64_t epochs, int64_t n, int64_t k,
                           int64_t classes, uint64_t seed) {
  h5_write_format(f, kViewsH5);
  h5_attr_write(f, "epochs", epochs);
  h5_attr_write(f, "train_size", n);
  h5_attr_write(f, "top_k", k);
  h5_attr_write(f, "classes", classes);
  h5_attr_write(f, "seed", static_cast<int64_t>(seed));
  h5_attr_write(f, "augment", int64_t(key.augment ? 1 : 0));
  h5_attr_write(f, "crop_pad", key.crop_pad);
  h5_attr_write(f, "flip", int64_t(key.flip ? 1 : 0));
  h5_attr_write(f, "transform", key.transform);
  h5_attr_write(f, "image_size", key.image_size);
  h5_attr_write(f, "temperature", key.temperature);
  h5_attr_write(f, "height", key.height);
  h5_attr_write(f, "width", key.width);
  h5_attr_write(f, "channels", key.channels);
  h5_attr_write(f, "mean", key.mean);
  h5_attr_write(f, "std", key.std);
  h5_attr_write(f, "dataset", key.dataset);
  h5_attr_write(f, "teacher", key.teacher);
  h5_attr_write(f, "teacher_id", key.teacher_id);
  if (key.teacher_test_top1 >= 0) h5_attr_write(f, "teacher_test_top1", key.teacher_test_top1);
}

// The cache's five datasets, open for writing.
struct ViewDatasets {
  H5Obj crop, flip, cls, prob, res;
  void close() {
    res.close();
    prob.close();
    cls.close();
    flip.close();
    crop.close();
  }
};

// The teacher on one batch `b` (its indices, pixels, labels and partners read)
// of epoch b.epoch, as a training step runs it; its rows written to the
// batch's (epoch, sample) rows of the file.
void cache_batch(const Batch& b, Teacher& teacher, const DatasetMeta& meta, const AugmentSpec& aug,
                 double temperature, int64_t k, ViewDatasets& d) {
  const int64_t m = b.size(), n = meta.train_size;
  std::vector<ViewParams> views(static_cast<size_t>(m));
  view_params(aug, b.epoch, b.indices.data(), m, meta.height, meta.width, views.data());
  const torch::Tensor x = train_inputs(b, meta, aug, views.data(), nullptr).x;
  torch::Tensor p;
  {
    torch::NoGradGuard ng;
    p = teacher_soft_target(teacher.logits(x), temperature).to(torch::kCPU).contiguous();
  }
  auto top = p.topk(k, /*dim=*/-1, /*largest=*/true, /*sorted=*/true);
  auto prob = std::get<0>(top).contiguous();
  auto cls_t = std::get<1>(top).to(torch::kInt32).contiguous();
  auto res = (1.0 - prob.to(torch::kDouble).sum(-1)).clamp_min(0.0).to(torch::kFloat32).contiguous();
  std::vector<int16_t> crop(static_cast<size_t>(m * 4));
  std::vector<uint8_t> flip(static_cast<size_t>(m));
  std::vector<uint16_t> cls(static_cast<size_t>(m * k));
  std::vector<int64_t> rows(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    crop[j * 4 + 0] = views[j].top;
    crop[j * 4 + 1] = views[j].left;
    crop[j * 4 + 2] = views[j].height;
    crop[j * 4 + 3] = views[j].width;
    flip[j] = views[j].flip;
    rows[j] = b.epoch * n + b.indices[j];  // ascending: a rank's batch is sorted (rank_slice)
  }
  const int32_t* cp = cls_t.data_ptr<int32_t>();
  for (int64_t q = 0; q < m * k; ++q) cls[q] = static_cast<uint16_t>(cp[q]);
  h5_write_rows(d.crop, rows, 4, crop.data());
  h5_write_rows(d.flip, rows, 1, flip.data());
  h5_write_rows(d.cls, rows, k, cls.data());
  h5_write_rows(d.prob, rows, k, prob.data_ptr<float>());
  h5_write_rows(d.res, rows, 1, res.data_ptr<float>());
}

}  // namespace

ViewCacheWritten write_view_cache(const std::string& path, const ViewCacheKey& key, Teacher& teacher,
                                  const DatasetMeta& meta, const AugmentSpec& aug, int64_t epochs, int64_t k,
                                  int64_t batch) {
  const World& w = world();
  const auto t0 = Clock::now();
  const int64_t n = meta.train_size, K = meta.num_classes;
  const int64_t E = aug.enabled ? epochs : 1;  // unaugmented views never change
  k = std::min(k, K);
  // The training loader's batches (data/loader.hpp): the epoch's permutation
  // of seed aug.seed (run.seed), global batches of G = batch x ranks, each
  // rank its slice in ascending sample order, the last partial batch too
  // (a run with drop_last skips it, one without trains on it).
  const int64_t G = batch * w.size, steps = steps_per_epoch(n, G, /*drop_last=*/false);
  const int64_t row = meta.height * meta.width * meta.channels;
  const std::string tmp = path + ".tmp";
  H5Lock lock(h5_mutex());
  H5Obj in = h5_open_read(meta.path, "dataset");
  SplitImages images(in, meta, "train");
  H5Obj labels(VK_CHECK(H5, H5Dopen2(in, "/train/labels", H5P_DEFAULT)));
  std::optional<MixPairing> pairing;  // the teacher sees the mixed views the students will train on
  if (aug.mixing()) pairing.emplace(aug.seed, n);
  H5Obj f = h5_create_parallel(tmp);  // collective
  write_view_attributes(f, key, E, n, k, K, aug.seed);
  const int64_t rows = E * n;
  ViewDatasets d;  // created collectively; every write below is independent
  d.crop = h5_create_dataset_chunked(f, "/views/crop", H5T_NATIVE_INT16, {rows, 4}, kChunkRows);
  d.flip = h5_create_dataset_chunked(f, "/views/flip", H5T_NATIVE_UINT8, {rows}, kChunkRows);
  d.cls = h5_create_dataset_chunked(f, "/targets/class", H5T_NATIVE_UINT16, {rows, k}, kChunkRows);
  d.prob = h5_create_dataset_chunked(f, "/targets/prob", H5T_NATIVE_FLOAT, {rows, k}, kChunkRows);
  d.res = h5_create_dataset_chunked(f, "/targets/residual", H5T_NATIVE_FLOAT, {rows}, kChunkRows);
  int64_t forwards = 0;
  for (int64_t e = 0; e < E; ++e) {
    const auto te = Clock::now();
    const std::vector<int64_t> perm = epoch_permutation(n, aug.seed, e);
    for (int64_t s = 0; s < steps; ++s) {
      Batch b;
      b.epoch = e;
      b.step = s;
      b.indices = rank_slice(perm, s, G, w.rank, w.size, &b.global_size);
      if (b.indices.empty()) continue;  // a short last batch: nothing for this rank
      b.pixels.resize(b.indices.size() * row);
      b.labels.resize(b.indices.size());
      images.read_decoded(b.indices, b.pixels.data());
      h5_read_rows(labels, b.indices, 1, b.labels.data());
      if (pairing) read_partners(images, labels, *pairing, row, b);
      cache_batch(b, teacher, meta, aug, key.temperature, k, d);
      forwards += b.size();
    }
    log0("teacher-cache: epoch %lld of %lld: %lld views in %.1f s\n", (long long)e + 1, (long long)E,
         (long long)n, seconds_since(te));
  }
  d.close();
  f.close();  // collective
  labels.close();
  images.close();
  in.close();
  barrier();
  if (w.root()) atomic_replace(path, tmp);
  barrier();
  ViewCacheWritten out;
  out.views = rows;
  out.teacher_forwards = allreduce_sum(forwards);
  out.top_k = k;
  out.bytes = file_size(path);
  out.seconds = seconds_since(t0);
  return out;
}

}  // namespace vitkd
