#pragma once
// Test-set accuracy of the trained model.
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "data/transforms/transforms.hpp"
#include "distill/teacher.hpp"
#include "model/vit.hpp"

namespace vitkd {

/// The test split's loader options, from the training loader's: every sample
/// once, in order, in batches of at least 256. The one rule for every
/// evaluation, so that all of them see the same batches.
LoaderOptions test_loader_options(LoaderOptions train);
/// The same for `split` (data.eval_split; its word names the file's group).
LoaderOptions eval_loader_options(LoaderOptions train, EvalSplit split);

/// One evaluation's per-sample record: for every sample of the split, in the
/// file's order, the predicted class and the label (the same on every rank).
struct SplitPredictions {
  std::vector<int32_t> predictions, labels;
  double top1() const;
};

/// Every evaluation sees the test images through the evaluation view of the
/// transform `views` (its output size and crop_pct; never augmented).

/// Top-1 accuracy over the whole test split, every rank evaluating its share
/// (`test` shards it); the model is left in training mode. Collective.
double evaluate(ViT& model, Loader& test, const DatasetMeta& meta, const AugmentSpec& views, bool bf16,
                SplitPredictions* out = nullptr);

/// How close the student's test predictions are to the teacher's.
struct TeacherAgreement {
  double agreement = 0;  ///< fraction of test samples where argmax student = argmax teacher
  double kl = 0;         ///< mean KL(softmax(t) || softmax(s)) at temperature 1 (nats)
  double kl_tau = 0;     ///< the same at temperature tau (the soft loss's; nats)
  double teacher_top1 = 0;  ///< the teacher's own test top-1 (argmax teacher = label)
};
/// Over the whole test split, every rank its share; runs the teacher once on
/// it (distill.eval_agreement). Collective.
TeacherAgreement teacher_agreement(ViT& model, Teacher& teacher, Loader& test, const DatasetMeta& meta,
                                   const AugmentSpec& views, bool bf16, double tau);

/// The teacher's own top-1 accuracy over the whole test split (unaugmented),
/// every rank its share, on the teacher's device. Collective.
double teacher_top1(Teacher& teacher, Loader& test, const DatasetMeta& meta, const AugmentSpec& views,
                    const torch::Device& dev);

}  // namespace vitkd
