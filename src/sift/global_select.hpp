#pragma once
// The sifting rule (sift/sifter.hpp) across ranks. Every rank's (sample
// index, loss) pairs are gathered, sorted by sample index and pushed into the
// one history every rank holds, so every rank makes the same decisions, and
// they do not depend on the rank count. Each rank then keeps its own rows.
// The history holds the last `history` losses *in addition to* the current
// global batch (capacity history + global batch): each sample is ranked
// against its own batch and the `history` losses before it, so the rule
// means the same at any rank count and batch size, also when one global
// batch is larger than `history`.
// Rank 0 can write every decision to a trace file ("epoch index loss kept"
// per line), closed when the selector is destroyed, whichever way the run ends.
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sift/sifter.hpp"

namespace vitkd {

class GlobalSelector {
 public:
  /// `history`: sift.history; `global_batch`: samples per global batch;
  /// `trace_path` non-empty: rank 0 writes the trace there (created, or
  /// truncated, at the first decision, so a run that stops before training
  /// leaves an old trace alone).
  GlobalSelector(double beta, int64_t history, int64_t global_batch, uint64_t seed,
                 const std::string& trace_path);

  struct Decision {
    std::vector<int64_t> rows;  ///< this rank's kept rows, ascending (indices into its batch)
    int64_t kept_global = 0;    ///< samples kept on all ranks together
  };
  /// Collective. `indices` [n] are this rank's samples (n may be 0) and
  /// `losses` their float losses [n] (undefined when n == 0).
  Decision select(const std::vector<int64_t>& indices, const torch::Tensor& losses, int64_t epoch);

  Sifter& sifter() { return sifter_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  Sifter sifter_;
  std::string trace_path_;
  std::unique_ptr<std::FILE, FileCloser> trace_;
};

}  // namespace vitkd
