#include "train/evaluate.hpp"

#include "comm/world.hpp"
#include "data/tensors.hpp"
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

}  // namespace vitkd
