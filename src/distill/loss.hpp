#pragma once
// Training losses, per sample ([B] tensors in fp32) so that sifting can rank
// samples; the trainer takes the mean. Logits are [B, K] (any float dtype).
//
//   CE(s, y)       = -(1-e) log softmax(s)_y - e mean_k log softmax(s)_k
//                    (e: label smoothing, train.label_smoothing; 0 = plain CE);
//                    for mixed labels y [B, K] (Mixup / CutMix: rows sum to 1)
//                    -sum_k ((1-e) y_k + e/K) log softmax(s)_k, which is the
//                    same for a one-hot y (timm's SoftTargetCrossEntropy of
//                    its mixup_target)
//   soft(s, t, y)  = (1-a) CE(s_cls, y) + a tau^2 KL(p || softmax(s_kd/tau)),  p = softmax(t/tau)
//                    KL summed over classes (per-sample, i.e. "batchmean" after the mean),
//                    computed from the soft target p itself (sum p log p - p log q, 0 log 0 = 0),
//                    so that a cache of p (distill/view_cache.hpp) gives the live loss's bits
//   hard(s, t, y)  = 1/2 CE(s_cls, y) + 1/2 CE(s_kd, argmax t)           (DeiT; with
//                    Mixup / CutMix y is the mixed label and t the teacher's
//                    logits on the mixed image, as DeiT trains)
// The teacher tensor is the teacher's logits t, or, with DistillSpec::teacher_probs
// (a teacher-view cache), the soft target p = softmax(t/tau) itself.
// s_kd is the distillation head when the student has a distillation token,
// else the class head.
#include <torch/torch.h>

#include "model/vit.hpp"

namespace vitkd {

struct DistillSpec {
  bool hard = false;         ///< hard (DeiT) instead of soft
  double temperature = 4.0;  ///< tau
  double alpha = 0.5;        ///< weight of the teacher term (soft)
  double label_smoothing = 0.0;  ///< e of the CE terms against the labels (train.label_smoothing)
  /// The teacher tensors are soft targets softmax(t/tau) [B, K] (rows sum to
  /// 1; from a teacher-view cache) rather than logits.
  bool teacher_probs = false;
};

/// The soft target softmax(t/tau) of teacher logits t [B, K], float32.
torch::Tensor teacher_soft_target(const torch::Tensor& teacher_logits, double temperature);
/// KL(p || softmax(s/tau)) per sample for a target distribution p [B, K].
torch::Tensor kl_from_probs(const torch::Tensor& student_logits, const torch::Tensor& p, double temperature);

/// CE against `labels` (int64 [B], or mixed labels float [B, K]), with label smoothing `smoothing` (PyTorch's
/// cross_entropy(label_smoothing=...): the target is (1-e) one-hot + e/K).
torch::Tensor cross_entropy_per_sample(const torch::Tensor& logits, const torch::Tensor& labels,
                                       double smoothing = 0.0);
torch::Tensor kl_per_sample(const torch::Tensor& student_logits, const torch::Tensor& teacher_logits,
                            double temperature);
/// Teacher-mode loss: CE of the prediction (mean of heads with a dist token).
torch::Tensor teacher_loss_per_sample(const ViTOutput& out, const torch::Tensor& labels, double smoothing = 0.0);
/// Distillation loss; `teacher_logits` [B, K].
torch::Tensor distill_loss_per_sample(const ViTOutput& student, const torch::Tensor& teacher_logits,
                                      const torch::Tensor& labels, const DistillSpec& spec);

}  // namespace vitkd
