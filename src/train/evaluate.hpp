#pragma once
// Test-set accuracy of the trained model.
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "model/vit.hpp"

namespace vitkd {

/// Top-1 accuracy over the whole test split, every rank evaluating its share
/// (`test` shards it); the model is left in training mode. Collective.
double evaluate(ViT& model, Loader& test, const DatasetMeta& meta, bool bf16);

}  // namespace vitkd
