#include "cmd/export.hpp"
#include "cmd/args.hpp"
#include "cmd/commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "comm/world.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "io/json.hpp"
#include "data/fits_model.hpp"
#include "model/vit.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out)
      throw UserError("cannot write '" + tmp + "': " + std::strerror(errno) +
                      "; choose an --out directory you can write to", false);
    out << text;
    out.flush();
    VK_CHECK(FILE, static_cast<bool>(out));
  }
  atomic_replace(path, tmp);
}

// The dataset whose normalization and class names the student expects: --data,
// else the data.path recorded in the checkpoint's configuration, if readable.
bool find_dataset(const CheckpointInfo& info, const std::string& ckpt, const std::string& data_flag,
                  DatasetMeta& meta, std::string& note) {
  if (!data_flag.empty()) {
    meta = validate_dataset(data_flag);
    return true;
  }
  std::string path;
  try {
    path = parse_config(info.config, ckpt + " (attribute /config)").data_path;
  } catch (const UserError& e) {
    note = std::string("cannot parse the checkpoint's configuration: ") + e.what();
    return false;
  }
  if (access(path.c_str(), R_OK) != 0) {
    note = "the training dataset '" + path + "' is not readable here";
    return false;
  }
  meta = validate_dataset(path);
  return true;
}

// The evaluation view the model was trained for (data.crop_pct; timm's
// pretrained_cfg carries it to timm's transforms): the key's default for a
// configuration that does not parse (older or foreign).
double trained_crop_pct(const CheckpointInfo& info, const std::string& ckpt) {
  try {
    return parse_config(info.config, ckpt + " (attribute /config)").data_crop_pct;
  } catch (const UserError&) {
    return Config{}.data_crop_pct;
  }
}

}  // namespace

int export_main(const std::vector<std::string>& args) {
  const cli::Command& cmd = cli::command("export");
  const cli::Args a = cli::parse(cmd, args);
  if (a.help()) return cli::print_help(cli::help_text(cmd));
  const std::string ckpt = a.positional("CHECKPOINT.h5"), out_dir = a.text("out"), data = a.text("data");
  const int64_t batch = a.integer("batch");

  // Everything is checked on every rank (same files, same errors); rank 0 writes.
  const CheckpointInfo info = read_checkpoint_info(ckpt);
  const ModelSpec& s = info.spec;
  DatasetMeta meta;
  std::string note;
  const bool have_data = find_dataset(info, ckpt, data, meta, note);
  const double crop_pct = trained_crop_pct(info, ckpt);
  if (have_data)
    // The model may read views cut from larger stored images (data/transforms).
    check_spec_fits_data(s, meta, "export: the model in " + ckpt, "",
                         "pass --data with the dataset it was trained on",
                         meta.height >= s.image_size && meta.width >= s.image_size ? s.image_size : 0);

  if (world().root()) {
    if (!make_dirs(out_dir))
      throw UserError("export: cannot create --out directory '" + out_dir + "': " +
                      std::strerror(errno), false);
    torch::manual_seed(0);
    ViT model(s);
    load_checkpoint_weights(ckpt, model);
    model->eval();

    // weights.h5
    {
      const std::string path = out_dir + "/weights.h5", tmp = path + ".tmp";
      {
        H5Lock lock(h5_mutex());
        H5Obj f = h5_create(tmp);
        h5_attr_write(f, "format", std::string(kExportFormat));
        h5_attr_write(f, "format_version", kExportVersion);
        h5_attr_write(f, "vitkd_version", std::string(VITKD_VERSION));
        write_model_spec_attrs(f, s);
        write_model_weights(f, model);
        f.close();
      }
      atomic_replace(path, tmp);
    }

    // reference.h5: a fixed input and vitkd's logits for it, fp32 and bf16.
    {
      torch::NoGradGuard ng;
      const int64_t n = batch * s.channels * s.image_size * s.image_size;
      auto x = torch::sin(torch::arange(n, torch::kFloat64) * 0.731 + 0.25)
                   .mul(1.5)
                   .to(torch::kFloat32)
                   .reshape({batch, s.channels, s.image_size, s.image_size})
                   .contiguous();
      auto l32 = model->forward(x).prediction().to(torch::kFloat32).contiguous();
      torch::Tensor l16;
      {
        AutocastBf16 ac(true);
        l16 = model->forward(x).prediction().to(torch::kFloat32).contiguous();
      }
      const std::string path = out_dir + "/reference.h5", tmp = path + ".tmp";
      {
        H5Lock lock(h5_mutex());
        H5Obj f = h5_create(tmp);
        h5_attr_write(f, "format", std::string("vitkd-export-reference"));
        h5_attr_write(f, "format_version", kExportVersion);
        h5_write(f, "/input", x.data_ptr<float>(), x.sizes().vec());
        h5_write(f, "/logits", l32.data_ptr<float>(), l32.sizes().vec());
        h5_write(f, "/logits_bf16", l16.data_ptr<float>(), l16.sizes().vec());
        f.close();
      }
      atomic_replace(path, tmp);
    }

    // model.json
    {
      JsonObject j;
      j.set("format", kExportFormat)
          .set("format_version", kExportVersion)
          .set("vitkd_version", VITKD_VERSION);
#define VITKD_JSON(type, name, def, meaning) j.set(#name, s.name);
      VITKD_MODEL_SPEC_FIELDS(VITKD_JSON)
#undef VITKD_JSON
      j.set("mlp_hidden", s.mlp_hidden())
          .set("parameters", s.parameter_count())
          .set("input", "float32 [N, channels, image_size, image_size] = (pixel/255 - mean[c]) / std[c]")
          .set("output", s.dist_token ? "logits [N, classes]: mean of the class and distillation heads"
                                      : "logits [N, classes]: the class head")
          .set("mean", have_data ? meta.mean : std::vector<double>{})
          .set("std", have_data ? meta.std : std::vector<double>{})
          .set("class_names", have_data ? meta.class_names : std::vector<std::string>{})
          .set("crop_pct", crop_pct)
          .set("interpolation", "bilinear")
          .set("dataset", have_data ? meta.path : std::string())
          .set("source_checkpoint", ckpt)
          .set("step", info.step)
          .set("test_top1", info.test_top1)
          .set("weights", "weights.h5")
          .set("reference", "reference.h5");
      j.write(out_dir + "/model.json");
    }
    for (const auto& e : python_loader_files()) write_text(out_dir + "/" + e.name, e.text);
    if (!have_data)
      std::printf("export: warning: no normalization or class names in model.json (%s); "
                  "pass --data FILE.h5 to add them\n", note.c_str());
    std::printf("export: %s -> %s/ (weights.h5, model.json, reference.h5 with %lld samples, "
                "vitkd_model.py, vitkd_export.py); load with: python3 %s/vitkd_export.py %s\n",
                s.describe().c_str(), out_dir.c_str(), (long long)batch, out_dir.c_str(),
                out_dir.c_str());
    std::fflush(stdout);
  }
  barrier();
  return kExitOk;
}

}  // namespace vitkd
