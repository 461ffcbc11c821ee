#include "train/evaluate.hpp"

#include "comm/world.hpp"
#include "data/tensors.hpp"
#include "distill/loss.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {

double evaluate(ViT& model, Loader& test, const DatasetMeta& meta, bool bf16) {
  torch::NoGradGuard ng;
  model->eval();
  test.begin_epoch(0);
  int64_t correct = 0, total = 0;
  AugmentSpec none;
  const torch::Device dev = model->parameters().front().device();
  while (auto b = test.next()) {
    if (b->size() == 0) continue;
    auto x = batch_input(*b, meta, none).to(dev);
    torch::Tensor pred;
    {
      AutocastBf16 ac(bf16, dev.type());
      pred = model->forward(x).prediction().argmax(-1);
    }
    correct += pred.eq(batch_labels(*b).to(dev)).sum().item<int64_t>();
    total += b->size();
  }
  model->train();
  correct = allreduce_sum(correct);
  total = allreduce_sum(total);
  return total ? double(correct) / double(total) : 0.0;
}

TeacherAgreement teacher_agreement(ViT& model, Teacher& teacher, Loader& test, const DatasetMeta& meta,
                                   bool bf16, double tau) {
  torch::NoGradGuard ng;
  model->eval();
  test.begin_epoch(0);
  double sums[4] = {0, 0, 0, 0};  // agreeing samples, KL sum, samples, KL sum at tau
  AugmentSpec none;
  const torch::Device dev = model->parameters().front().device();
  while (auto b = test.next()) {
    if (b->size() == 0) continue;
    auto x = batch_input(*b, meta, none).to(dev);
    torch::Tensor s;
    {
      AutocastBf16 ac(bf16, dev.type());
      s = model->forward(x).prediction().to(torch::kFloat32);
    }
    const torch::Tensor t = teacher.logits(x).to(torch::kFloat32);
    sums[0] += double(s.argmax(-1).eq(t.argmax(-1)).sum().item<int64_t>());
    sums[1] += kl_per_sample(s, t, 1.0).sum().item<double>();
    sums[2] += double(b->size());
    sums[3] += kl_per_sample(s, t, tau).sum().item<double>();
  }
  model->train();
  allreduce_sum_inplace(sums, 4);
  TeacherAgreement a;
  if (sums[2] > 0) {
    a.agreement = sums[0] / sums[2];
    a.kl = sums[1] / sums[2];
    a.kl_tau = sums[3] / sums[2];
  }
  return a;
}

}  // namespace vitkd
