#include "data/image_folder.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "data/dataset.hpp"
#include "data/image_store.hpp"
#include "data/jpeg_codec.hpp"
#include "data/transforms/resize.hpp"
#include "data/validation.hpp"
#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/hash.hpp"

namespace vitkd {
namespace {

// ---- listing ------------------------------------------------------------------------

struct Listing {
  std::vector<std::string> classes;             // class folder names
  std::vector<std::vector<std::string>> files;  // [class] sorted file names
  int64_t ignored = 0;                          // entries with other extensions
};

bool image_extension(const std::string& name) {
  const auto dot = name.find_last_of('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

std::vector<std::string> list_dir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d)
    throw UserError("prepare folder: cannot read directory '" + dir + "': " + std::strerror(errno) +
                    "; pass a folder with one subfolder of images per class");
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Listing list_folder(const std::string& dir) {
  Listing l;
  for (const auto& name : list_dir(dir)) {
    const std::string p = dir + "/" + name;
    if (!is_dir(p)) {
      ++l.ignored;
      continue;
    }
    std::vector<std::string> files;
    for (const auto& f : list_dir(p)) {
      if (image_extension(f) && !is_dir(p + "/" + f)) files.push_back(f);
      else ++l.ignored;
    }
    if (files.empty())
      throw UserError("prepare folder: class folder '" + p +
                      "' has no .png, .jpg or .jpeg files; add images or remove the folder");
    l.classes.push_back(name);
    l.files.push_back(std::move(files));
  }
  if (l.classes.size() < 2)
    throw UserError("prepare folder: '" + dir + "' has " + std::to_string(l.classes.size()) +
                    " class subfolder(s); it needs one subfolder of images per class, at least 2");
  return l;
}

// Listing <-> bytes ('\0'-separated: a file name cannot contain '\0').
std::string pack(const Listing& l) {
  std::string s = std::to_string(l.classes.size()) + '\0' + std::to_string(l.ignored) + '\0';
  for (size_t k = 0; k < l.classes.size(); ++k) {
    s += l.classes[k] + '\0' + std::to_string(l.files[k].size()) + '\0';
    for (const auto& f : l.files[k]) s += f + '\0';
  }
  return s;
}
Listing unpack(const std::string& s) {
  size_t pos = 0;
  auto next = [&]() {
    const size_t e = s.find('\0', pos);
    std::string v = s.substr(pos, e - pos);
    pos = e + 1;
    return v;
  };
  Listing l;
  const size_t k = std::stoull(next());
  l.ignored = std::stoll(next());
  for (size_t c = 0; c < k; ++c) {
    l.classes.push_back(next());
    const size_t n = std::stoull(next());
    std::vector<std::string> files;
    for (size_t i = 0; i < n; ++i) files.push_back(next());
    l.files.push_back(std::move(files));
  }
  return l;
}

struct Item {
  std::string path;
  int32_t label;
};

}  // namespace

Image resize_center_crop(const Image& in, int64_t size) {
  Image out;
  out.height = out.width = size;
  out.channels = in.channels;
  out.pixels.resize(static_cast<size_t>(size * size * in.channels));
  resize_centre_crop(in.pixels.data(), in.height, in.width, in.channels, size, out.pixels.data());
  return out;
}

namespace {

// This rank's first element of a sequence of which every rank holds `mine`
// elements, in rank order, and the total over the ranks.
void exclusive_offset(int64_t mine, int64_t& first, int64_t& total) {
  const std::vector<double> counts = allgather(double(mine));
  first = 0;
  total = 0;
  for (int r = 0; r < static_cast<int>(counts.size()); ++r) {
    if (r < world().rank) first += static_cast<int64_t>(counts[r]);
    total += static_cast<int64_t>(counts[r]);
  }
}

// Rank 0 lists the folder; every rank gets the same listing, or the same UserError.
Listing shared_listing(const std::string& dir) {
  std::string packed, error;
  if (world().root()) {
    try {
      packed = pack(list_folder(dir));
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  error = broadcast_string(error);
  if (!error.empty()) throw UserError(error);
  return unpack(broadcast_string(packed));
}

// Deterministic split per class: split[0] train, split[1] test.
void split_items(const FolderSpec& sp, const Listing& l, std::vector<Item> (&split)[2]) {
  for (int64_t k = 0; k < static_cast<int64_t>(l.classes.size()); ++k) {
    const auto& files = l.files[k];
    const int64_t n = static_cast<int64_t>(files.size());
    std::vector<int64_t> order(n);
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates, counter-based
      std::swap(order[i], order[uniform_below(hash64(sp.seed, 0x5e11ULL, k, i), i + 1)]);
    const int64_t n_test = std::min<int64_t>(n, std::llround(sp.test_fraction * n));
    for (int64_t i = 0; i < n; ++i)
      split[i < n_test ? 1 : 0].push_back({sp.dir + "/" + l.classes[k] + "/" + files[order[i]],
                                           static_cast<int32_t>(k)});
  }
  for (int s = 0; s < 2; ++s)
    if (split[s].empty())
      throw UserError("prepare folder: --test-fraction " + std::to_string(sp.test_fraction) +
                      " leaves the " + (s ? "test" : "train") + " split of '" + sp.dir +
                      "' empty; " + (s ? "raise it or add images" : "lower it"));
}

// This rank's share of both splits, decoded and resized, with the train
// split's per-channel sums of v and v^2 (v = pixel/255).
struct DecodedShare {
  std::vector<uint8_t> pixels[2];  ///< raw: [n, S, S, C]; JPEG: the n files back to back
  std::vector<int64_t> sizes[2];   ///< JPEG: [n] bytes per image
  std::vector<int32_t> labels[2];
  int64_t skipped = 0;
  std::vector<double> sum, sq;
};
DecodedShare decode_share(const FolderSpec& sp, const std::vector<Item> (&split)[2]) {
  const World& w = world();
  const int64_t S = sp.size, C = sp.channels;
  DecodedShare d;
  d.sum.assign(C, 0.0);
  d.sq.assign(C, 0.0);
  for (int s = 0; s < 2; ++s) {
    const int64_t N = static_cast<int64_t>(split[s].size());
    const int64_t lo = N * w.rank / w.size, hi = N * (w.rank + 1) / w.size;
    for (int64_t i = lo; i < hi; ++i) {
      const Item& it = split[s][i];
      Image img;
      const std::string why = decode_image(it.path, C, img);
      if (!why.empty()) {
        ++d.skipped;
        warn("prepare folder: skipped '" + it.path + "': " + why);
        continue;
      }
      Image out = resize_center_crop(img, S);
      if (sp.store == kStorageJpeg) {  // keep the bytes; the statistics are the decoded pixels'
        const std::vector<uint8_t> jpg = jpeg_encode(out.pixels.data(), S, S, C, sp.quality);
        const std::string bad = jpeg_decode(jpg.data(), jpg.size(), S, S, C, out.pixels.data());
        if (!bad.empty()) throw RuntimeError("prepare folder: the JPEG encoding of '" + it.path + "' " + bad);
        d.pixels[s].insert(d.pixels[s].end(), jpg.begin(), jpg.end());
        d.sizes[s].push_back(static_cast<int64_t>(jpg.size()));
      } else {
        d.pixels[s].insert(d.pixels[s].end(), out.pixels.begin(), out.pixels.end());
      }
      d.labels[s].push_back(it.label);
      if (s == 0)
        for (size_t p = 0; p < out.pixels.size(); ++p) {
          const double v = out.pixels[p] / 255.0;
          d.sum[p % C] += v;
          d.sq[p % C] += v * v;
        }
    }
  }
  return d;
}

// The refusals of --store and --quality (the command line's table refuses
// them first; this is the library's own check).
void check_store(const FolderSpec& sp) {
  if (sp.store != kStorageRaw && sp.store != kStorageJpeg)
    throw UserError("prepare folder: --store '" + sp.store + "' is not a storage; use raw (pixels) or jpeg");
  if (sp.store == kStorageJpeg && (sp.quality < 1 || sp.quality > 100))
    throw UserError("prepare folder: --quality " + std::to_string(sp.quality) +
                    " is outside 1..100 (libjpeg's scale); use e.g. --quality 90");
  if (sp.store == kStorageJpeg && sp.val_fraction > 0)
    throw UserError("prepare folder: --val-fraction is not available with --store jpeg yet; "
                    "prepare with --store raw, or without --val-fraction");
}

// Split s (0 train, 1 test) of this rank's share into the file created
// collectively: its rows [first, first + n) of `total` (and, JPEG, its bytes
// [byte_first, ...) of `byte_total`). Collective.
void write_split(hid_t f, const FolderSpec& sp, const DecodedShare& d, int s, int64_t first, int64_t total,
                 int64_t byte_first, int64_t byte_total) {
  const std::string g = s ? "/test" : "/train";
  const int64_t n = static_cast<int64_t>(d.labels[s].size()), S = sp.size, C = sp.channels;
  if (sp.store == kStorageJpeg) {
    write_jpeg_split(f, s ? "test" : "train", first, total, byte_first, byte_total, d.sizes[s], d.pixels[s]);
  } else {
    H5Obj di = h5_create_dataset(f, g + "/images", H5T_NATIVE_UINT8, {total, S, S, C});
    h5_write_slab(di.get(), first, n, d.pixels[s].data(), /*collective=*/true);
  }
  H5Obj dl = h5_create_dataset(f, g + "/labels", H5T_NATIVE_INT32, {total});
  h5_write_slab(dl.get(), first, n, d.labels[s].data(), /*collective=*/true);
}

}  // namespace

namespace {

// Reads the written file's splits back, carves the validation split out of
// /train (data/validation.hpp) and writes the file again with it, keeping
// the folder's attributes. Returns the validation samples. Rank 0 only.
int64_t carve_folder_validation(const FolderSpec& sp, const std::vector<std::string>& classes, int64_t skipped,
                                int64_t S, int64_t C) {
  DatasetSplit train, test;
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_open_read(sp.out, "dataset");
    h5_read(f, "/train/images", train.images);
    h5_read(f, "/train/labels", train.labels);
    h5_read(f, "/test/images", test.images);
    h5_read(f, "/test/labels", test.labels);
  }
  const ValCarve carve =
      carve_validation(train, S * S * C, static_cast<int64_t>(classes.size()), sp.val_fraction, sp.val_seed);
  write_dataset(sp.out, carve.train, test, S, S, C, classes, ValRecord{&carve, sp.val_fraction, sp.val_seed});
  H5Lock lock(h5_mutex());
  hid_t id = H5Fopen(sp.out.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (id < 0) throw RuntimeError("cannot reopen '" + sp.out + "': " + h5_error_message());
  H5Obj f(id);
  h5_attr_write(f, "source", sp.dir);
  h5_attr_write(f, "skipped", skipped);
  return carve.val.size();
}

}  // namespace

void prepare_folder(const FolderSpec& sp) {
  const World& w = world();
  const int64_t S = sp.size, C = sp.channels;

  check_store(sp);
  const Listing l = shared_listing(sp.dir);
  const int64_t K = static_cast<int64_t>(l.classes.size());
  std::vector<Item> split[2];  // 0 train, 1 test
  split_items(sp, l, split);

  // Decode this rank's share of each split.
  DecodedShare d = decode_share(sp, split);
  auto& pixels = d.pixels;
  auto& labels = d.labels;
  const std::vector<double>& sum = d.sum;
  const std::vector<double>& sq = d.sq;
  const int64_t skipped = d.skipped;

  // Offsets of this rank's rows (and JPEG bytes) and the totals.
  int64_t first[2], total[2], byte_first[2], byte_total[2];
  for (int s = 0; s < 2; ++s) {
    exclusive_offset(static_cast<int64_t>(labels[s].size()), first[s], total[s]);
    exclusive_offset(static_cast<int64_t>(pixels[s].size()), byte_first[s], byte_total[s]);
  }
  const int64_t skipped_total = allreduce_sum(skipped);
  for (int s = 0; s < 2; ++s)
    if (total[s] == 0)
      throw UserError("prepare folder: every image of the " + std::string(s ? "test" : "train") +
                      " split of '" + sp.dir + "' failed to decode (" +
                      std::to_string(skipped_total) + " skipped, reasons above); fix the files");
  std::vector<double> sums(2 * C);
  for (int64_t c = 0; c < C; ++c) {
    sums[c] = sum[c];
    sums[C + c] = sq[c];
  }
  allreduce_sum_inplace(sums.data(), 2 * C);
  std::vector<double> mean, sd;
  channel_mean_std(std::vector<double>(sums.begin(), sums.begin() + C),
                   std::vector<double>(sums.begin() + C, sums.end()), double(total[0]) * S * S,
                   mean, sd);

  // Write: collective parallel HDF5 for the pixels and labels, then rank 0
  // adds the attributes and renames the finished file into place.
  const std::string tmp = sp.out + ".tmp";
  int64_t dir_bad = 0;
  if (w.root()) dir_bad = make_dirs(parent_dir(sp.out)) ? 0 : 1;
  if (allreduce_sum(dir_bad) != 0)
    throw UserError("prepare folder: cannot create the directory of --out '" + sp.out +
                    "'; choose a writable location");
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create_parallel(tmp);
    for (int s = 0; s < 2; ++s)
      write_split(f, sp, d, s, first[s], total[s], byte_first[s], byte_total[s]);
    f.close();
  }
  barrier();
  if (w.root()) {
    write_dataset_attributes(tmp, l.classes, mean, sd);
    {
      H5Lock lock(h5_mutex());
      hid_t id = H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      if (id < 0) throw RuntimeError("cannot reopen '" + tmp + "': " + h5_error_message());
      H5Obj f(id);
      h5_attr_write(f, "source", sp.dir);
      h5_attr_write(f, "skipped", skipped_total);
      if (sp.store == kStorageJpeg) write_jpeg_attributes(f, S, S, C, sp.quality);
      f.close();
    }
    atomic_replace(sp.out, tmp);
  }
  // The validation split, carved on rank 0 from the file just written (the
  // whole training split in its memory) and the file written again with it.
  std::string carve_error;
  int64_t n_val = 0;
  if (sp.val_fraction > 0 && w.root()) {
    try {
      n_val = carve_folder_validation(sp, l.classes, skipped_total, S, C);
      total[0] -= n_val;
    } catch (const UserError& e) {
      carve_error = e.what();
    }
  }
  carve_error = broadcast_string(carve_error);
  if (!carve_error.empty()) throw UserError(carve_error);
  if (w.root()) {
    if (n_val > 0)
      std::printf("prepare: validation split of %lld samples (--val-fraction %g of each class, --val-seed %llu)\n",
                  (long long)n_val, sp.val_fraction, (unsigned long long)sp.val_seed);
    const std::string stored = sp.store == kStorageJpeg ? "JPEG quality " + std::to_string(sp.quality) + ", " +
                                                             std::to_string(byte_total[0] + byte_total[1]) + " bytes"
                                                       : std::string("raw pixels");
    std::printf("prepare: wrote %s (folder %s: %lld train, %lld test, %lldx%lldx%lld, %lld classes, %s; "
                "skipped %lld unreadable or corrupt file(s), ignored %lld other entries; %d rank(s))\n",
                sp.out.c_str(), sp.dir.c_str(), (long long)total[0], (long long)total[1],
                (long long)S, (long long)S, (long long)C, (long long)K, stored.c_str(), (long long)skipped_total,
                (long long)l.ignored, w.size);
    std::fflush(stdout);
  }
  barrier();
}

}  // namespace vitkd
