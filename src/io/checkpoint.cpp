#include "io/checkpoint.hpp"

#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

void save_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info) {
  const std::string tmp = path + ".tmp";
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create(tmp);
    h5_attr_write(f, "format", std::string(kCheckpointFormat));
    h5_attr_write(f, "format_version", kCheckpointVersion);
    h5_attr_write(f, "vitkd_version", std::string(VITKD_VERSION));
    h5_attr_write(f, "step", info.step);
    h5_attr_write(f, "epoch", info.epoch);
    h5_attr_write(f, "world_size", info.world_size);
    h5_attr_write(f, "mode", info.mode);
    h5_attr_write(f, "config", info.config);
    h5_attr_write(f, "test_top1", info.test_top1);
    const ModelSpec& s = info.spec;
    h5_attr_write(f, "model_image_size", s.image_size);
    h5_attr_write(f, "model_channels", s.channels);
    h5_attr_write(f, "model_patch", s.patch);
    h5_attr_write(f, "model_dim", s.dim);
    h5_attr_write(f, "model_depth", s.depth);
    h5_attr_write(f, "model_heads", s.heads);
    h5_attr_write(f, "model_mlp_ratio", s.mlp_ratio);
    h5_attr_write(f, "model_classes", s.classes);
    h5_attr_write(f, "model_dist_token", static_cast<int64_t>(s.dist_token));
    torch::NoGradGuard ng;
    for (const auto& p : model->named_parameters()) {
      auto t = p.value().detach().to(torch::kFloat32).contiguous();
      h5_write(f, "/model/" + p.key(), t.data_ptr<float>(), t.sizes().vec());
    }
    f.close();
  }
  atomic_replace(path, tmp);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  auto need = [&](const char* a) {
    if (!h5_attr_exists(f, a))
      throw UserError(path + ": missing attribute '/" + std::string(a) +
                      "' (not a vitkd checkpoint?); point at a checkpoint.h5 written by vitkd train");
  };
  need("format");
  if (h5_attr_string(f, "format") != kCheckpointFormat)
    throw UserError(path + ": not a vitkd checkpoint (attribute /format is '" +
                    h5_attr_string(f, "format") + "', expected '" + kCheckpointFormat +
                    "'); point at a checkpoint.h5 written by vitkd train");
  need("format_version");
  if (h5_attr_int(f, "format_version") != kCheckpointVersion)
    throw UserError(path + ": checkpoint format version " +
                    std::to_string(h5_attr_int(f, "format_version")) + " is not supported (expected " +
                    std::to_string(kCheckpointVersion) + ")");
  CheckpointInfo info;
  for (const char* a : {"step", "epoch", "world_size", "mode", "config", "model_image_size",
                        "model_channels", "model_patch", "model_dim", "model_depth", "model_heads",
                        "model_mlp_ratio", "model_classes", "model_dist_token"})
    need(a);
  info.step = h5_attr_int(f, "step");
  info.epoch = h5_attr_int(f, "epoch");
  info.world_size = h5_attr_int(f, "world_size");
  info.mode = h5_attr_string(f, "mode");
  info.config = h5_attr_string(f, "config");
  if (h5_attr_exists(f, "test_top1")) info.test_top1 = h5_attr_double(f, "test_top1");
  ModelSpec& s = info.spec;
  s.image_size = h5_attr_int(f, "model_image_size");
  s.channels = h5_attr_int(f, "model_channels");
  s.patch = h5_attr_int(f, "model_patch");
  s.dim = h5_attr_int(f, "model_dim");
  s.depth = h5_attr_int(f, "model_depth");
  s.heads = h5_attr_int(f, "model_heads");
  s.mlp_ratio = h5_attr_double(f, "model_mlp_ratio");
  s.classes = h5_attr_int(f, "model_classes");
  s.dist_token = h5_attr_int(f, "model_dist_token") != 0;
  if (s.image_size < 1 || s.channels < 1 || s.patch < 1 || s.image_size % s.patch != 0 ||
      s.dim < 1 || s.depth < 1 || s.heads < 1 || s.dim % s.heads != 0 || !(s.mlp_ratio > 0) ||
      s.classes < 2)
    throw UserError(path + ": the model attributes describe an invalid ViT (" + s.describe() +
                    "); the checkpoint is corrupt");
  return info;
}

void load_checkpoint_weights(const std::string& path, ViT& model) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  torch::NoGradGuard ng;
  for (auto& p : model->named_parameters()) {
    const std::string d = "/model/" + p.key();
    if (!h5_exists(f, d))
      throw UserError(path + ": missing dataset '" + d + "'; the checkpoint does not match this model");
    auto info = h5_dataset_info(f, d);
    if (info.dims != p.value().sizes().vec() || info.type_class != H5T_FLOAT)
      throw UserError(path + ": dataset '" + d + "' is " + info.describe() +
                      ", but the model expects float " +
                      H5DatasetInfo{p.value().sizes().vec(), H5T_FLOAT, 4, true}.describe() +
                      "; the checkpoint is from another model shape");
    auto buf = torch::empty(p.value().sizes(), torch::kFloat32);
    h5_read(f, d, buf.data_ptr<float>(), buf.numel());
    p.value().copy_(buf);
  }
}

}  // namespace vitkd
