#pragma once
// The teacher of a distillation run, whatever it was trained with.
//
// Two kinds, chosen by the configuration (exactly one key set):
//   teacher.checkpoint  = "checkpoint.h5"  a vitkd ViT checkpoint (src/io/checkpoint.hpp),
//                       = ["a.h5", "b.h5"] or an ensemble of them: the mean of
//                                          their probabilities at distill.temperature
//   teacher.torchscript = "teacher.pt"     any module saved with torch.jit.save whose
//                                          forward maps float [N,C,H,W] to logits [N,K]
// Both see exactly the input the student sees: the dataset's images as float
// (pixel/255 - mean[c]) / std[c], with mean and std the dataset file's /mean
// and /std attributes, after the same augmentation. A teacher runs frozen
// (no parameter requires grad), in eval mode, under no-grad, in bf16 autocast
// when precision.compute = "bf16" (a TorchScript module that fails under bf16
// runs in fp32, which the start-up log says).
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace vitkd {

struct DatasetMeta;

/// The teacher a run distills from, as the configuration names it (built by
/// teacher_spec() in train/setup.hpp, the one place that reads those keys).
struct TeacherSpec {
  std::vector<std::string> checkpoints;  ///< teacher.checkpoint: one vitkd checkpoint, or several (an ensemble)
  std::string torchscript;               ///< teacher.torchscript ("" = none; exactly one of the two is set)
  int64_t view_side = 0;                 ///< model.image_size: the student's views, pixels square
  AttentionKernel attention = AttentionKernel::Auto;  ///< model.attention, for vitkd teachers
  double temperature = 4.0;              ///< distill.temperature: an ensemble averages softmax(logits / tau)
  bool bf16 = false;                     ///< precision.compute resolved to bf16
};

class Teacher {
 public:
  virtual ~Teacher() = default;
  /// Logits float32 [n, K] for a normalized batch x float32 [n, C, H, W].
  virtual torch::Tensor logits(const torch::Tensor& x) = 0;
  /// Number of parameters (elements).
  virtual int64_t parameters() const = 0;
  /// Forward FLOPs per sample (matrix products, 2 per multiply-add); 0 when
  /// unknown (TorchScript), in which case MFU counts the student only.
  virtual double forward_flops() const = 0;
  /// One line for the log: what it is, where it came from, its precision.
  virtual std::string describe() const = 0;
  /// What it computes, wherever its file lies: the model's description and a
  /// hash of its weights as loaded (a copy of the file elsewhere has the same
  /// identity, other weights another one). Caches of its targets match on it.
  virtual std::string identity() const = 0;
  /// Moves the teacher to `device`; logits() then takes and returns tensors there.
  virtual void to(const torch::Device& device) = 0;
};

/// Builds the configured teacher and checks that it fits the dataset (input
/// size, channels, class count): a UserError naming the file, the expected and
/// actual shapes and the fix otherwise. Call on every rank (each runs its own
/// copy).
std::unique_ptr<Teacher> make_teacher(const TeacherSpec& spec, const DatasetMeta& meta);

}  // namespace vitkd
