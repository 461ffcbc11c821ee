// `vitkd prepare ...`: converts Fashion-MNIST, a synthetic set or an image
// folder into vitkd's HDF5 dataset layout (data/dataset.hpp).
#include "cmd/commands.hpp"

#include <cstdio>

#include "cmd/args.hpp"
#include "comm/world.hpp"
#include "data/dataset.hpp"
#include "data/image_folder.hpp"
#include "data/validation.hpp"
#include "util/error.hpp"

namespace vitkd {

int prepare_main(const std::vector<std::string>& args) {
  const cli::Command* cmd = cli::pick_kind("prepare", args);
  if (!cmd) return cli::print_help(cli::group_help("prepare"));
  const cli::Args a = cli::parse(*cmd, std::vector<std::string>(args.begin() + 1, args.end()));
  if (a.help()) return cli::print_help(cli::help_text(*cmd));
  const std::string kind = args[0];
  if (kind == "folder") {
    FolderSpec fs;
    fs.dir = a.positional("DIR");
    fs.out = a.text("out");
    fs.size = a.integer("size");
    fs.channels = a.integer("channels");
    fs.seed = static_cast<uint64_t>(a.integer("seed"));
    fs.test_fraction = a.number("test-fraction");
    fs.store = a.text("store");
    fs.quality = static_cast<int>(a.integer("quality"));
    if (a.given("val-fraction")) {
      check_val_fraction(a.number("val-fraction"));  // the one-line refusal, on every rank
      fs.val_fraction = a.number("val-fraction");
      fs.val_seed = static_cast<uint64_t>(a.integer("val-seed"));
    }
    prepare_folder(fs);  // every rank takes part
    return kExitOk;
  }
  const std::string out = a.text("out");
  const bool with_val = a.given("val-fraction");
  if (with_val) check_val_fraction(a.number("val-fraction"));  // the one-line refusal, on every rank
  // Carves the validation split out of `train` when asked, and writes the file.
  auto write = [&](DatasetSplit& train, const DatasetSplit& test, int64_t h, int64_t w, int64_t c,
                   const std::vector<std::string>& names) {
    if (!with_val) return write_dataset(out, train, test, h, w, c, names);
    const ValCarve carve = carve_validation(train, h * w * c, static_cast<int64_t>(names.size()),
                                            a.number("val-fraction"), static_cast<uint64_t>(a.integer("val-seed")));
    write_dataset(out, carve.train, test, h, w, c, names,
                  ValRecord{&carve, a.number("val-fraction"), static_cast<uint64_t>(a.integer("val-seed"))});
    train = carve.train;
    std::printf("prepare: validation split of %lld samples (--val-fraction %g of each class, --val-seed %lld)\n",
                (long long)carve.val.size(), a.number("val-fraction"), (long long)a.integer("val-seed"));
  };
  if (world().root()) {
    DatasetSplit train, test;
    if (kind == "fashion-mnist") {
      const std::string dir = a.text("source");
      train = read_idx_pair(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
      test = read_idx_pair(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
      write(train, test, 28, 28, 1,
                    {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                     "Sneaker", "Bag", "Ankle boot"});
      std::printf("prepare: wrote %s (Fashion-MNIST: %lld train, %lld test, 28x28x1, 10 classes)\n",
                  out.c_str(), (long long)train.size(), (long long)test.size());
    } else {
      SyntheticSpec sp;
      sp.train = a.integer("train");
      sp.test = a.integer("test");
      sp.size = a.integer("size");
      sp.channels = a.integer("channels");
      sp.classes = a.integer("classes");
      sp.seed = static_cast<uint64_t>(a.integer("seed"));
      make_synthetic(sp, train, test);
      std::vector<std::string> names;
      for (int64_t k = 0; k < sp.classes; ++k) names.push_back("class" + std::to_string(k));
      write(train, test, sp.size, sp.size, sp.channels, names);
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
