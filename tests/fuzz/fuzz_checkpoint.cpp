// libFuzzer target: checkpoint validation (read_checkpoint_info, the entry
// point that checks a checkpoint before anything is loaded from it).
// The input bytes mutate a valid checkpoint header (root attributes and the
// /model group); the result is written as a real HDF5 file in /dev/shm.
// Property: accept or throw UserError / RuntimeError; on accept, the model
// described is a valid ViT.
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "fuzz_common.hpp"
#include "h5_spec.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"

using namespace vitkd;
using namespace vitkd::fuzz;

namespace {

FileSpec valid_checkpoint() {
  FileSpec s;
  s.attrs["format"] = str_value(kCheckpointFormat);
  s.attrs["format_version"] = int_value(kCheckpointVersion);
  s.attrs["vitkd_version"] = str_value("0.1.0");
  s.attrs["step"] = int_value(10);
  s.attrs["epoch"] = int_value(1);
  s.attrs["world_size"] = int_value(2);
  s.attrs["mode"] = str_value("teacher");
  s.attrs["config"] = str_value("[run]\nmode = \"teacher\"\n");
  s.attrs["test_top1"] = real_value(0.5);
  s.attrs["model_image_size"] = int_value(16);
  s.attrs["model_channels"] = int_value(1);
  s.attrs["model_patch"] = int_value(4);
  s.attrs["model_dim"] = int_value(32);
  s.attrs["model_depth"] = int_value(2);
  s.attrs["model_heads"] = int_value(2);
  s.attrs["model_mlp_ratio"] = real_value(2.0);
  s.attrs["model_classes"] = int_value(4);
  s.attrs["model_dist_token"] = int_value(0);
  s.nodes["/model/head.bias"] = dataset(Type::Float32, {4}, {0});
  return s;
}

const std::vector<std::string> kAttrs = {
    "format", "format_version", "vitkd_version", "step", "epoch", "world_size", "mode",
    "config", "test_top1", "model_image_size", "model_channels", "model_patch", "model_dim",
    "model_depth", "model_heads", "model_mlp_ratio", "model_classes", "model_dist_token"};
const std::vector<std::string> kPaths = {"/model", "/model/head.bias", "/model/head.weight"};
const std::vector<int64_t> kInts = {-1, 0, 1, 2, 3, 4, 5, 7, 16, 28, 32, INT32_MAX,
                                    INT64_MAX, INT64_MIN};
const std::vector<double> kReals = {0.0, -1.0, 0.5, 2.0, 4.0, 1e-300, 1e300,
                                    NAN, INFINITY, -INFINITY};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h5_silence_errors();  // as vitkd does at start-up
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path("checkpoint");
  FileSpec spec = valid_checkpoint();
  Bytes in(data, size);
  mutate(spec, in, kAttrs, kPaths, kInts, kReals);
  if (!write_h5(spec, path)) return 0;
  CheckpointInfo info;
  const bool ok = accepts([&] { info = read_checkpoint_info(path); });
  if (size == 0 && !ok) finding("the valid template checkpoint was rejected");
  if (ok) {
    const ModelSpec& s = info.spec;
    if (s.image_size < 1 || s.channels < 1 || s.patch < 1 || s.image_size % s.patch != 0 ||
        s.dim < 1 || s.depth < 1 || s.heads < 1 || s.dim % s.heads != 0 ||
        !(s.mlp_ratio > 0) || s.classes < 2)
      finding("accepted a checkpoint describing an invalid ViT");
  }
  std::remove(path.c_str());
  return 0;
}
