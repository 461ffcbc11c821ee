#include "data/dataset.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "comm/world.hpp"
#include "data/image_store.hpp"
#include "data/validation.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"

namespace vitkd {

namespace {

void check_split(hid_t f, const std::string& file, const std::string& split, DatasetMeta& m,
                 int64_t& n_out) {
  const std::string img = "/" + split + (m.storage == kStorageJpeg ? "/jpeg" : "/images");
  const std::string lab = "/" + split + "/labels";
  for (const auto& d : {img, lab})
    if (!h5_exists(f, d))
      throw UserError(file + ": missing dataset '" + d + "'; create the file with `vitkd prepare`");
  std::vector<int64_t> dims;  // {N, H, W, C}
  if (m.storage == kStorageJpeg) {
    dims = check_jpeg_split(f, file, split);
  } else {
    auto ii = h5_dataset_info(f, img);
    if (ii.type_class != H5T_INTEGER || ii.type_size != 1 || ii.is_signed || ii.dims.size() != 4)
      throw UserError(file + ": dataset '" + img + "' is " + ii.describe() +
                      ", expected uint8 [N,H,W,C]; re-create it with `vitkd prepare`");
    dims = ii.dims;
  }
  // (appended, not a chain of string +: GCC 12 reports a false -Wrestrict for that chain here.)
  std::string shape = "[";
  for (size_t k = 0; k < 4; ++k) shape.append(k ? "," : "").append(std::to_string(dims[k]));
  shape += "]";
  auto li = h5_dataset_info(f, lab);
  if (li.type_class != H5T_INTEGER || li.type_size != 4 || !li.is_signed || li.dims.size() != 1)
    throw UserError(file + ": dataset '" + lab + "' is " + li.describe() +
                    ", expected int32 [N]; re-create it with `vitkd prepare`");
  if (li.dims[0] != dims[0])
    throw UserError(file + ": '" + img + "' has " + std::to_string(dims[0]) + " images but '" +
                    lab + "' has " + std::to_string(li.dims[0]) + " labels; they must match");
  if (dims[0] == 0)
    throw UserError(file + ": split '" + split + "' is empty (" + img + " has 0 images)");
  if (dims[1] < 1 || dims[2] < 1 || dims[3] < 1)
    throw UserError(file + ": dataset '" + img + "' has an empty image shape " + shape);
  if (m.height == 0) {
    m.height = dims[1];
    m.width = dims[2];
    m.channels = dims[3];
  } else if (m.height != dims[1] || m.width != dims[2] || m.channels != dims[3]) {
    throw UserError(file + ": '" + img + "' has image shape " + shape +
                    " unlike the train split; both splits need the same H, W, C");
  }
  n_out = dims[0];
  // Range-check the labels block by block, so that memory stays bounded
  // whatever size the file claims.
  constexpr int64_t kBlock = 1 << 16;
  std::vector<int32_t> labels(static_cast<size_t>(std::min(kBlock, n_out)));
  for (int64_t b = 0; b < n_out; b += kBlock) {
    const int64_t cnt = std::min(kBlock, n_out - b);
    h5_read_slice(f, lab, b, cnt, labels.data());
    for (int64_t j = 0; j < cnt; ++j)
      if (labels[j] < 0 || labels[j] >= m.num_classes)
        throw UserError(file + ": label " + std::to_string(labels[j]) + " at " + lab + "[" +
                        std::to_string(b + j) + "] is out of range [0, " +
                        std::to_string(m.num_classes) + ") given by the class_names attribute");
  }
}

}  // namespace

DatasetMeta validate_dataset(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "dataset");
  DatasetMeta m;
  m.path = path;
  auto need_attr = [&](const char* name) {
    if (!h5_attr_exists(f, name))
      throw UserError(path + ": missing attribute '/" + std::string(name) +
                      "' (not a vitkd dataset?); create the file with `vitkd prepare`");
  };
  h5_require_format(f, path, dataset_format_of(f));
  if (h5_attr_exists(f, "storage")) m.storage = h5_attr_string(f, "storage");
  if (m.storage != kStorageRaw && m.storage != kStorageJpeg)
    throw UserError(path + ": attribute /storage is '" + m.storage + "', expected 'raw' or 'jpeg'; "
                    "re-create the file with `vitkd prepare`");
  if ((m.storage == kStorageJpeg) != (dataset_format_of(f).version == kDatasetJpegVersion))
    throw UserError(path + ": attribute /storage '" + m.storage + "' does not match format_version " +
                    std::to_string(h5_attr_int(f, "format_version")) + "; re-create the file with `vitkd prepare`");
  if (m.storage == kStorageJpeg && h5_attr_exists(f, "jpeg_quality")) m.jpeg_quality = h5_attr_int(f, "jpeg_quality");
  need_attr("class_names");
  m.class_names = h5_attr_strings(f, "class_names");
  m.num_classes = static_cast<int64_t>(m.class_names.size());
  if (m.num_classes < 2)
    throw UserError(path + ": attribute /class_names lists " + std::to_string(m.num_classes) +
                    " classes; at least 2 are needed");
  check_split(f, path, "train", m, m.train_size);
  check_split(f, path, "test", m, m.test_size);
  if (h5_exists(f, "/val")) check_split(f, path, "val", m, m.val_size);
  need_attr("mean");
  need_attr("std");
  m.mean = h5_attr_doubles(f, "mean");
  m.std = h5_attr_doubles(f, "std");
  if (static_cast<int64_t>(m.mean.size()) != m.channels ||
      static_cast<int64_t>(m.std.size()) != m.channels)
    throw UserError(path + ": attributes /mean and /std need one value per channel (" +
                    std::to_string(m.channels) + ")");
  for (double s : m.std)
    if (!(s > 0) || !std::isfinite(s))
      throw UserError(path + ": attribute /std holds a non-positive value; re-create the file");
  return m;
}

DatasetMeta validate_dataset_collective(const std::string& path) {
  DatasetMeta m;
  std::string error;
  if (world().root()) {
    try {
      m = validate_dataset(path);
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  error = broadcast_string(error);
  if (!error.empty()) throw UserError(error);
  // Every rank reads the file, so every node must see it (a path on one
  // node's local disk, or a shared folder not mounted everywhere): the first
  // rank that cannot is named, with its host, before anything trains.
  const int64_t blind = allreduce_min(access(path.c_str(), R_OK) == 0 ? INT64_MAX : world().rank);
  if (blind != INT64_MAX) {
    char host[256] = {0};
    if (world().rank == blind) std::snprintf(host, sizeof host, "%s", world().host.c_str());
    broadcast_bytes(host, sizeof host, static_cast<int>(blind));
    throw UserError("data.path " + path + " is not readable on host " + host + " (rank " + std::to_string(blind) +
                    "), though rank 0 reads it; put the dataset on storage every node mounts, or copy it to the "
                    "same path on every node first (e.g. sbcast in the job script; docs/cluster.md)");
  }
  int64_t sizes[10] = {m.height, m.width, m.channels, m.num_classes, m.train_size, m.test_size,
                       static_cast<int64_t>(m.mean.size()), m.val_size, m.storage == kStorageJpeg ? 1 : 0,
                       m.jpeg_quality};
  broadcast_bytes(sizes, sizeof sizes, 0);
  m.path = path;
  m.height = sizes[0];
  m.width = sizes[1];
  m.channels = sizes[2];
  m.num_classes = sizes[3];
  m.train_size = sizes[4];
  m.test_size = sizes[5];
  m.val_size = sizes[7];
  m.storage = sizes[8] ? kStorageJpeg : kStorageRaw;
  m.jpeg_quality = sizes[9];
  m.mean.resize(sizes[6]);
  m.std.resize(sizes[6]);
  broadcast_bytes(m.mean.data(), sizes[6] * sizeof(double), 0);
  broadcast_bytes(m.std.data(), sizes[6] * sizeof(double), 0);
  std::string names;
  for (const auto& n : m.class_names) names += n + '\0';
  names = broadcast_string(names);
  m.class_names.clear();
  for (size_t b = 0, e; (e = names.find('\0', b)) != std::string::npos; b = e + 1)
    m.class_names.push_back(names.substr(b, e - b));
  return m;
}

void channel_mean_std(const std::vector<double>& sum, const std::vector<double>& sq, double count,
                      std::vector<double>& mean, std::vector<double>& sd) {
  const size_t channels = sum.size();
  mean.assign(channels, 0.0);
  sd.assign(channels, 0.0);
  const double cnt = std::max<double>(1.0, count);
  for (size_t c = 0; c < channels; ++c) {
    mean[c] = sum[c] / cnt;
    sd[c] = std::sqrt(std::max(1e-12, sq[c] / cnt - mean[c] * mean[c]));
  }
}

namespace {
void write_root_attrs(hid_t f, const std::vector<std::string>& class_names,
                      const std::vector<double>& mean, const std::vector<double>& sd) {
  h5_write_format(f, kDatasetH5);
  h5_attr_write(f, "class_names", class_names);
  h5_attr_write(f, "mean", mean);
  h5_attr_write(f, "std", sd);
}
}  // namespace

void write_dataset_attributes(const std::string& path, const std::vector<std::string>& class_names,
                              const std::vector<double>& mean, const std::vector<double>& sd) {
  H5Lock lock(h5_mutex());
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (id < 0) throw RuntimeError("cannot open '" + path + "' to write its attributes: " + h5_error_message());
  H5Obj f(id);
  write_root_attrs(f, class_names, mean, sd);
  f.close();
}

void write_dataset(const std::string& path, const DatasetSplit& train, const DatasetSplit& test,
                   int64_t height, int64_t width, int64_t channels,
                   const std::vector<std::string>& class_names) {
  write_dataset(path, train, test, height, width, channels, class_names, ValRecord{});
}

void write_dataset(const std::string& path, const DatasetSplit& train, const DatasetSplit& test,
                   int64_t height, int64_t width, int64_t channels,
                   const std::vector<std::string>& class_names, const ValRecord& val) {
  std::vector<double> sum(channels, 0.0), sq(channels, 0.0);
  for (size_t i = 0; i < train.images.size(); ++i) {
    double v = train.images[i] / 255.0;
    sum[i % channels] += v;
    sq[i % channels] += v * v;
  }
  std::vector<double> mean, sd;
  channel_mean_std(sum, sq, double(train.size()) * height * width, mean, sd);
  const std::string tmp = path + ".tmp";
  if (!make_dirs(parent_dir(path)))
    throw UserError("cannot create the directory of '" + path + "': " + std::strerror(errno));
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create(tmp);
    write_root_attrs(f, class_names, mean, sd);
    const DatasetSplit* splits[3] = {&train, &test, val.carve ? &val.carve->val : nullptr};
    const char* names[3] = {"/train", "/test", "/val"};
    for (int k = 0; k < 3 && splits[k]; ++k) {
      const std::string g = names[k];
      h5_write(f, g + "/images", splits[k]->images.data(), {splits[k]->size(), height, width, channels});
      h5_write(f, g + "/labels", splits[k]->labels.data(), {splits[k]->size()});
    }
    if (val.carve) {
      h5_write(f, "/val/source_indices", val.carve->val_source);
      h5_attr_write(f, "val_fraction", val.fraction);
      h5_attr_write(f, "val_seed", static_cast<int64_t>(val.seed));
      h5_attr_write(f, "val_rule", std::string(kValRule));
    }
    f.close();
  }
  atomic_replace(path, tmp);
}

namespace {
uint32_t read_be32(gzFile g, const std::string& path) {
  unsigned char b[4];
  if (gzread(g, b, 4) != 4)
    throw UserError("'" + path + "' is truncated (no IDX header); re-download the dataset");
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
}

struct GzCloser {
  void operator()(gzFile g) const { if (g) gzclose(g); }
};
}  // namespace

DatasetSplit read_idx_pair(const std::string& images_path, const std::string& labels_path) {
  DatasetSplit s;
  int64_t n_img = 0;
  {
    std::unique_ptr<gzFile_s, GzCloser> g(gzopen(images_path.c_str(), "rb"));
    if (!g) throw UserError("cannot read '" + images_path + "'; install dataset-fashion-mnist or pass --source DIR");
    uint32_t magic = read_be32(g.get(), images_path);
    if (magic != 0x00000803)
      throw UserError("'" + images_path + "' is not an IDX image file (magic " + std::to_string(magic) + ")");
    n_img = read_be32(g.get(), images_path);
    uint32_t rows = read_be32(g.get(), images_path), cols = read_be32(g.get(), images_path);
    if (rows != 28 || cols != 28)
      throw UserError("'" + images_path + "' holds " + std::to_string(rows) + "x" + std::to_string(cols) +
                      " images; Fashion-MNIST is 28x28");
    s.images.resize(static_cast<size_t>(n_img) * rows * cols);
    int64_t got = gzread(g.get(), s.images.data(), static_cast<unsigned>(s.images.size()));
    if (got != static_cast<int64_t>(s.images.size()))
      throw UserError("'" + images_path + "' is truncated: expected " + std::to_string(s.images.size()) +
                      " pixel bytes, read " + std::to_string(got));
  }
  {
    std::unique_ptr<gzFile_s, GzCloser> g(gzopen(labels_path.c_str(), "rb"));
    if (!g) throw UserError("cannot read '" + labels_path + "'; install dataset-fashion-mnist or pass --source DIR");
    uint32_t magic = read_be32(g.get(), labels_path);
    if (magic != 0x00000801)
      throw UserError("'" + labels_path + "' is not an IDX label file (magic " + std::to_string(magic) + ")");
    uint32_t n = read_be32(g.get(), labels_path);
    if (static_cast<int64_t>(n) != n_img)
      throw UserError("'" + labels_path + "' has " + std::to_string(n) + " labels for " +
                      std::to_string(n_img) + " images");
    std::vector<uint8_t> raw(n);
    if (gzread(g.get(), raw.data(), n) != static_cast<int>(n))
      throw UserError("'" + labels_path + "' is truncated");
    s.labels.assign(raw.begin(), raw.end());
  }
  return s;
}

void make_synthetic(const SyntheticSpec& sp, DatasetSplit& train, DatasetSplit& test) {
  const int64_t S = sp.size, C = sp.channels, K = sp.classes;
  std::mt19937_64 rng(sp.seed);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  // Class templates: 3 Gaussian blobs per class and channel.
  std::vector<double> tmpl(K * S * S * C, 0.0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int b = 0; b < 3; ++b) {
        double cy = U(rng) * S, cx = U(rng) * S, r = 1.5 + U(rng) * S / 5.0, a = 0.5 + 0.5 * U(rng);
        for (int64_t y = 0; y < S; ++y)
          for (int64_t x = 0; x < S; ++x) {
            double d2 = (y - cy) * (y - cy) + (x - cx) * (x - cx);
            tmpl[((k * S + y) * S + x) * C + c] += a * std::exp(-d2 / (2 * r * r));
          }
      }
  std::normal_distribution<double> noise(0.0, 0.15);
  auto fill = [&](DatasetSplit& s, int64_t n) {
    s.images.resize(n * S * S * C);
    s.labels.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = static_cast<int64_t>(U(rng) * K) % K;
      int dy = static_cast<int>(U(rng) * 5) - 2, dx = static_cast<int>(U(rng) * 5) - 2;
      s.labels[i] = static_cast<int32_t>(k);
      for (int64_t y = 0; y < S; ++y)
        for (int64_t x = 0; x < S; ++x)
          for (int64_t c = 0; c < C; ++c) {
            int64_t sy = std::clamp<int64_t>(y - dy, 0, S - 1), sx = std::clamp<int64_t>(x - dx, 0, S - 1);
            double v = tmpl[((k * S + sy) * S + sx) * C + c] + noise(rng);
            s.images[((i * S + y) * S + x) * C + c] =
                static_cast<uint8_t>(std::clamp(v * 200.0 + 20.0, 0.0, 255.0));
          }
    }
  };
  fill(train, sp.train);
  fill(test, sp.test);
}

}  // namespace vitkd
