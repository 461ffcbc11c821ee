#pragma once
// `vitkd export CHECKPOINT.h5 --out DIR [--data FILE.h5] [--batch N]`: the
// student, ready to be loaded and served from PyTorch. DIR receives:
//
//   weights.h5     format "vitkd-export", format_version 1 (root attributes),
//                  plus the checkpoint's model_* attributes (the ModelSpec);
//                  /model/<parameter name> float32, the parameter's shape, with
//                  the names and layouts of src/model/vit.hpp (e.g.
//                  /model/patch_embed.proj.weight [D, C*p*p], patches flattened
//                  (c, py, px); /model/blocks.0.attn.qkv.weight [3D, D]).
//   model.json     flat JSON: format, format_version, the ModelSpec (image_size,
//                  channels, patch, dim, depth, heads, mlp_ratio, mlp_hidden,
//                  classes, dist_token), the input normalization (mean, std:
//                  per channel, pixel/255 units; input = (pixel/255 - mean)/std,
//                  channels first), class_names, source checkpoint, step,
//                  test_top1, output ("prediction": class head, or the mean of
//                  the class and distillation heads).
//   reference.h5   format "vitkd-export-reference": /input float32 [B,C,H,W]
//                  (deterministic: sin of the element index), /logits float32
//                  [B,K] vitkd's fp32 prediction, /logits_bf16 float32 [B,K] the
//                  prediction under bf16 autocast (vitkd's default compute).
//   vitkd_model.py, vitkd_export.py   analysis/'s PyTorch ViT and loader
//                  (embedded in the binary at build time): `python3
//                  DIR/vitkd_export.py DIR` rebuilds the model, checks its logits
//                  against reference.h5 and writes DIR/student.pt (TorchScript).
//
// mean, std and class_names come from the dataset the checkpoint was trained
// on (its data.path), or from --data; without either they are left empty.
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

constexpr const char* kExportFormat = "vitkd-export";
constexpr int64_t kExportVersion = 1;

/// analysis/'s Python files, embedded at build time (CMakeLists.txt).
struct EmbeddedFile {
  const char* name;  ///< file name, e.g. "vitkd_export.py"
  const char* text;  ///< its whole content
};
const std::vector<EmbeddedFile>& python_loader_files();

}  // namespace vitkd
