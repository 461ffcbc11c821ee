#pragma once
// Checkpoint files (HDF5), format "vitkd-checkpoint", version 1:
//   /model/<parameter name>   float32, the parameter's shape (ViT's names)
//   attributes on "/":
//     format, format_version, vitkd_version
//     step (optimizer steps done), epoch, world_size, mode ("teacher"|"distill")
//     config                    the effective configuration as TOML
//     model_image_size, model_channels, model_patch, model_dim, model_depth,
//     model_heads, model_mlp_ratio, model_classes, model_dist_token
//     test_top1                 last evaluated accuracy (or -1)
// Written to <path>.tmp, closed, then renamed over <path>.
#include <cstdint>
#include <string>

#include "model/vit.hpp"

namespace vitkd {

constexpr const char* kCheckpointFormat = "vitkd-checkpoint";
constexpr int64_t kCheckpointVersion = 1;

struct CheckpointInfo {
  ModelSpec spec;
  int64_t step = 0, epoch = 0, world_size = 1;
  std::string mode, config;
  double test_top1 = -1;
};

/// Writes the model and `info` (call on one rank).
void save_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info);

/// Reads and checks the header of a checkpoint (UserError naming `path`).
CheckpointInfo read_checkpoint_info(const std::string& path);

/// Loads /model/* into `model`; every parameter must be present with its shape.
void load_checkpoint_weights(const std::string& path, ViT& model);

}  // namespace vitkd
