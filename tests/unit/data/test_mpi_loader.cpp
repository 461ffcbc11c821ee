// The loader across ranks (data/loader.hpp): every sample once per epoch;
// run at 2 and 3 ranks (and valid at 1). CTest runs each test on its own
// (--gtest_filter), so a failure names what broke.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "comm/world.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "fixtures.hpp"

using namespace vitkd;
using vitkd::test::TempDir;

namespace {
std::vector<int64_t> gather_all(const std::vector<int64_t>& local) {
  const int P = world().size;
  int n = static_cast<int>(local.size());
  std::vector<int> counts(P), displs(P, 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 1; r < P; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<int64_t> all(displs[P - 1] + counts[P - 1]);
  MPI_Allgatherv(local.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T,
                 MPI_COMM_WORLD);
  return all;
}
}  // namespace

TEST(MpiLoader, EverySampleExactlyOncePerEpochAcrossRanks) {
  TempDir tmp(/*shared=*/true);
  const std::string p = tmp / "loader.h5";
  const int64_t N = 103;  // not a multiple of any global batch below: exercises the remainder
  if (world().root()) {
    DatasetSplit tr, te;
    tr.images.resize(N * 4);
    te.images.resize(4);
    for (int64_t i = 0; i < N; ++i) {
      tr.images[i * 4] = static_cast<uint8_t>(i);
      tr.labels.push_back(static_cast<int32_t>(i % 3));
    }
    te.labels.push_back(0);
    write_dataset(p, tr, te, 2, 2, 1, {"a", "b", "c"});
  }
  barrier();
  DatasetMeta m = validate_dataset(p);
  LoaderOptions o;
  o.batch_size = 5;
  o.seed = 11;
  o.rank = world().rank;
  o.world = world().size;
  Loader ld(m, o);
  const int64_t G = o.batch_size * o.world;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    ld.begin_epoch(epoch);
    const auto perm = epoch_permutation(N, o.seed, epoch);
    std::vector<int64_t> epoch_all;
    int64_t steps = 0;
    while (auto b = ld.next()) {
      for (int64_t i = 0; i < b->size(); ++i)
        ASSERT_EQ(b->pixels[i * 4], static_cast<uint8_t>(b->indices[i]));
      auto all = gather_all(b->indices);
      std::sort(all.begin(), all.end());
      // The union over ranks is the single-rank global batch of this step.
      EXPECT_EQ(all, rank_slice(perm, b->step, G, 0, 1)) << "epoch " << epoch << " step " << b->step;
      epoch_all.insert(epoch_all.end(), all.begin(), all.end());
      ++steps;
    }
    EXPECT_EQ(steps, ld.steps_per_epoch());
    std::sort(epoch_all.begin(), epoch_all.end());
    std::vector<int64_t> expect(N);
    std::iota(expect.begin(), expect.end(), 0);
    EXPECT_EQ(epoch_all, expect) << "epoch " << epoch;
  }
  barrier();
}
