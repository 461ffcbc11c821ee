#include "train/evaluate.hpp"

#include <algorithm>

#include "comm/world.hpp"
#include "data/tensors.hpp"
#include "distill/loss.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

/// Calls fn(x, labels) for every non-empty batch of this rank's share of the
/// test split: x normalized, in the evaluation view of `views`, both on `dev`.
template <class Fn>
void for_each_test_batch(Loader& test, const DatasetMeta& meta, const AugmentSpec& views, const torch::Device& dev,
                         Fn&& fn) {
  test.begin_epoch(0);
  AugmentSpec none = views;
  none.enabled = false;
  while (auto b = test.next()) {
    if (b->size() == 0) continue;
    fn(batch_input(*b, meta, none).to(dev), batch_labels(*b).to(dev), *b);
  }
}

}  // namespace

LoaderOptions test_loader_options(LoaderOptions o) { return eval_loader_options(o, EvalSplit::Test); }

LoaderOptions eval_loader_options(LoaderOptions o, EvalSplit split) {
  o.split = choice_name(split);
  o.shuffle = false;
  o.drop_last = false;
  o.batch_size = std::max<int64_t>(o.batch_size, 256);
  return o;
}

double SplitPredictions::top1() const {
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += predictions[i] == labels[i];
  return labels.empty() ? 0.0 : double(correct) / double(labels.size());
}

double evaluate(ViT& model, Loader& test, const DatasetMeta& meta, const AugmentSpec& views, bool bf16,
                SplitPredictions* out) {
  torch::NoGradGuard ng;
  model->eval();
  int64_t correct = 0, total = 0;
  // Per sample, 1 + the predicted class and 1 + the label at its index (0: another rank's), summed over ranks.
  std::vector<double> marks(out ? 2 * test.split_size() : 0, 0.0);
  const torch::Device dev = model->parameters().front().device();
  for_each_test_batch(test, meta, views, dev, [&](const torch::Tensor& x, const torch::Tensor& y, const Batch& b) {
    torch::Tensor pred;
    {
      AutocastBf16 ac(bf16, dev.type());
      pred = model->forward(x).prediction().argmax(-1);
    }
    correct += pred.eq(y).sum().item<int64_t>();
    total += y.size(0);
    if (out) {
      const torch::Tensor p = pred.to(torch::kCPU).to(torch::kInt64).contiguous();
      const auto pa = p.accessor<int64_t, 1>();
      for (int64_t i = 0; i < b.size(); ++i) {
        marks[2 * b.indices[i]] = 1.0 + double(pa[i]);
        marks[2 * b.indices[i] + 1] = 1.0 + double(b.labels[i]);
      }
    }
  });
  model->train();
  correct = allreduce_sum(correct);
  total = allreduce_sum(total);
  if (out) {
    allreduce_sum_inplace(marks.data(), static_cast<int64_t>(marks.size()));
    out->predictions.resize(marks.size() / 2);
    out->labels.resize(marks.size() / 2);
    for (size_t i = 0; i < marks.size() / 2; ++i) {
      out->predictions[i] = static_cast<int32_t>(marks[2 * i]) - 1;
      out->labels[i] = static_cast<int32_t>(marks[2 * i + 1]) - 1;
    }
  }
  return total ? double(correct) / double(total) : 0.0;
}

TeacherAgreement teacher_agreement(ViT& model, Teacher& teacher, Loader& test, const DatasetMeta& meta,
                                   const AugmentSpec& views, bool bf16, double tau) {
  torch::NoGradGuard ng;
  model->eval();
  double sums[5] = {0, 0, 0, 0, 0};  // agreeing samples, KL sum, samples, KL sum at tau, teacher correct
  const torch::Device dev = model->parameters().front().device();
  for_each_test_batch(test, meta, views, dev, [&](const torch::Tensor& x, const torch::Tensor& y, const Batch&) {
    torch::Tensor s;
    {
      AutocastBf16 ac(bf16, dev.type());
      s = model->forward(x).prediction().to(torch::kFloat32);
    }
    const torch::Tensor t = teacher.logits(x).to(torch::kFloat32);
    sums[0] += double(s.argmax(-1).eq(t.argmax(-1)).sum().item<int64_t>());
    sums[1] += kl_per_sample(s, t, 1.0).sum().item<double>();
    sums[2] += double(y.size(0));
    sums[3] += kl_per_sample(s, t, tau).sum().item<double>();
    sums[4] += double(t.argmax(-1).eq(y).sum().item<int64_t>());
  });
  model->train();
  allreduce_sum_inplace(sums, 5);
  TeacherAgreement a;
  if (sums[2] > 0) {
    a.agreement = sums[0] / sums[2];
    a.kl = sums[1] / sums[2];
    a.kl_tau = sums[3] / sums[2];
    a.teacher_top1 = sums[4] / sums[2];
  }
  return a;
}

double teacher_top1(Teacher& teacher, Loader& test, const DatasetMeta& meta, const AugmentSpec& views,
                    const torch::Device& dev) {
  torch::NoGradGuard ng;
  double counts[2] = {0, 0};  // correct, samples
  for_each_test_batch(test, meta, views, dev, [&](const torch::Tensor& x, const torch::Tensor& y, const Batch&) {
    counts[0] += double(teacher.logits(x).argmax(-1).eq(y).sum().item<int64_t>());
    counts[1] += double(y.size(0));
  });
  allreduce_sum_inplace(counts, 2);
  return counts[1] > 0 ? counts[0] / counts[1] : 0.0;
}

}  // namespace vitkd
