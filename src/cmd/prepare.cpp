// `vitkd prepare ...`: converts Fashion-MNIST, a synthetic set or an image
// folder into vitkd's HDF5 dataset layout (data/dataset.hpp).
#include "cmd/commands.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "comm/world.hpp"
#include "data/dataset.hpp"
#include "data/image_folder.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace vitkd {

namespace {
const char* kPrepareUsage =
    "usage: vitkd prepare fashion-mnist --out FILE.h5 [--source DIR]\n"
    "       vitkd prepare synthetic --out FILE.h5 [--train N --test N --size S --channels C "
    "--classes K --seed S]\n"
    "       vitkd prepare folder DIR --out FILE.h5 --size S [--test-fraction F --seed N "
    "--channels 1|3]\n";
const char* kFolderUsage =
    "usage: vitkd prepare folder DIR --out FILE.h5 --size S [--test-fraction F --seed N --channels 1|3]";

std::map<std::string, std::string> parse_flags(const std::vector<std::string>& args, size_t from,
                                               const std::vector<std::string>& allowed) {
  std::map<std::string, std::string> out;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= args.size())
      throw UserError("prepare: unexpected argument '" + a + "'; " + kPrepareUsage);
    std::string key = a.substr(2);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::vector<std::string> flags;
      for (auto& k : allowed) flags.push_back(k);
      std::string n = nearest(key, flags);
      throw UserError("prepare: unknown option '" + a + "'" +
                      (n.empty() ? "" : " (did you mean '--" + n + "'?)") + "; " + kPrepareUsage);
    }
    out[key] = args[++i];
  }
  return out;
}

int64_t int_flag(const std::map<std::string, std::string>& f, const std::string& k, int64_t def,
                 int64_t min_value) {
  auto it = f.find(k);
  if (it == f.end()) return def;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end || v < min_value)
    throw UserError("prepare: --" + k + " must be an integer >= " + std::to_string(min_value) +
                    ", got '" + it->second + "'");
  return v;
}
}  // namespace

int prepare_main(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    if (world().root()) std::fputs(kPrepareUsage, stdout);
    return args.empty() ? kExitUser : kExitOk;
  }
  const std::string kind = args[0];
  std::map<std::string, std::string> f;
  if (kind == "fashion-mnist") {
    f = parse_flags(args, 1, {"out", "source"});
  } else if (kind == "synthetic") {
    f = parse_flags(args, 1, {"out", "train", "test", "size", "channels", "classes", "seed"});
  } else if (kind == "folder") {
    if (args.size() < 2 || args[1].rfind("--", 0) == 0)
      throw UserError("prepare folder: missing the image folder DIR; " + std::string(kFolderUsage));
    f = parse_flags(args, 2, {"out", "size", "test-fraction", "seed", "channels"});
    if (!f.count("out")) throw UserError("prepare folder: --out FILE.h5 is required; " + std::string(kFolderUsage));
    if (!f.count("size"))
      throw UserError("prepare folder: --size S (output height = width in pixels) is required; " +
                      std::string(kFolderUsage));
    FolderSpec fs;
    fs.dir = args[1];
    fs.out = f["out"];
    fs.size = int_flag(f, "size", 0, 1);
    fs.channels = int_flag(f, "channels", 3, 1);
    if (fs.channels != 1 && fs.channels != 3)
      throw UserError("prepare folder: --channels must be 1 (luminance) or 3 (RGB), got " +
                      std::to_string(fs.channels));
    fs.seed = static_cast<uint64_t>(int_flag(f, "seed", 1, 0));
    if (f.count("test-fraction")) {
      const std::string v = f["test-fraction"];
      char* end = nullptr;
      fs.test_fraction = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end || !(fs.test_fraction >= 0 && fs.test_fraction < 1))
        throw UserError("prepare folder: --test-fraction must be a number in [0, 1), got '" + v + "'");
    }
    prepare_folder(fs);  // every rank takes part
    return kExitOk;
  } else {
    throw UserError("prepare: unknown dataset kind '" + kind +
                    "'; expected 'fashion-mnist', 'synthetic' or 'folder'\n" + kPrepareUsage);
  }
  if (!f.count("out")) throw UserError("prepare: --out FILE.h5 is required; " + std::string(kPrepareUsage));
  const std::string out = f["out"];
  if (world().root()) {
    DatasetSplit train, test;
    if (kind == "fashion-mnist") {
      const std::string dir = f.count("source") ? f["source"] : "/usr/share/datasets/fashion-mnist";
      train = read_idx_pair(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
      test = read_idx_pair(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
      write_dataset(out, train, test, 28, 28, 1,
                    {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                     "Sneaker", "Bag", "Ankle boot"});
      std::printf("prepare: wrote %s (Fashion-MNIST: %lld train, %lld test, 28x28x1, 10 classes)\n",
                  out.c_str(), (long long)train.size(), (long long)test.size());
    } else {
      SyntheticSpec sp;
      sp.train = int_flag(f, "train", sp.train, 1);
      sp.test = int_flag(f, "test", sp.test, 1);
      sp.size = int_flag(f, "size", sp.size, 4);
      sp.channels = int_flag(f, "channels", sp.channels, 1);
      sp.classes = int_flag(f, "classes", sp.classes, 2);
      sp.seed = static_cast<uint64_t>(int_flag(f, "seed", static_cast<int64_t>(sp.seed), 0));
      make_synthetic(sp, train, test);
      std::vector<std::string> names;
      for (int64_t k = 0; k < sp.classes; ++k) names.push_back("class" + std::to_string(k));
      write_dataset(out, train, test, sp.size, sp.size, sp.channels, names);
      std::printf("prepare: wrote %s (synthetic: %lld train, %lld test, %lldx%lldx%lld, %lld classes)\n",
                  out.c_str(), (long long)sp.train, (long long)sp.test, (long long)sp.size,
                  (long long)sp.size, (long long)sp.channels, (long long)sp.classes);
    }
    std::fflush(stdout);
  }
  barrier();
  return kExitOk;
}

}  // namespace vitkd
