#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "sift/global_select.hpp"
#include "sift/sample_pool.hpp"
#include "sift/sifter.hpp"

using namespace vitkd;

TEST(Sift, KeptFractionIsOneOverOnePlusBeta) {
  for (double beta : {0.5, 1.0, 3.0}) {
    Sifter s(beta, 500, 42);
    std::mt19937_64 rng(7);
    std::exponential_distribution<double> loss(1.0);  // stationary losses
    int64_t kept = 0, seen = 0;
    for (int64_t batch = 0; batch < 20000 / 100; ++batch) {
      std::vector<int64_t> idx(100);
      std::vector<double> l(100);
      for (int i = 0; i < 100; ++i) {
        idx[i] = batch * 100 + i;
        l[i] = loss(rng);
      }
      for (auto k : s.select(idx, l, 0)) kept += k;
      seen += 100;
    }
    const double frac = double(kept) / seen;
    EXPECT_NEAR(frac, 1.0 / (1.0 + beta), 0.02) << "beta " << beta;
  }
}

TEST(Sift, BetaZeroKeepsEverything) {
  Sifter s(0.0, 10, 1);
  std::vector<int64_t> idx{1, 2, 3};
  std::vector<double> l{0.0, 0.0, 0.0};  // pct = 0, yet beta 0 keeps all
  for (auto k : s.select(idx, l, 0)) EXPECT_EQ(k, 1);
}

TEST(Sift, PercentileCountsStrictlyBelowAndTheRingEvictsTheOldest) {
  LossHistory h(3);
  EXPECT_EQ(h.percentile(1.0), 0.0);
  h.push(1);
  h.push(2);
  h.push(3);
  EXPECT_DOUBLE_EQ(h.percentile(2.5), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(h.percentile(1.0), 0.0);  // strictly below
  h.push(10);                                // evicts 1
  EXPECT_EQ(h.ordered(), (std::vector<double>{2, 3, 10}));
  EXPECT_DOUBLE_EQ(h.percentile(2.5), 1.0 / 3.0);
}

TEST(Sift, SelectionIsKeyedOnSampleNotPosition) {
  // The batch's own losses are pushed first: the largest loss of a fresh
  // history has pct = (n-1)/n and the smallest pct = 0 (never kept).
  Sifter a(1.0, 100, 9);
  auto k = a.select({5, 6, 7, 8}, {0.1, 0.2, 0.3, 0.4}, 2);
  EXPECT_EQ(k[0], 0);
  // The same sample index gives the same u in the same epoch, whatever the rest.
  EXPECT_EQ(a.uniform(2, 123), Sifter(1.0, 7, 9).uniform(2, 123));
  EXPECT_NE(a.uniform(2, 123), a.uniform(3, 123));

  // The same global batches handed over in another order keep the same
  // samples. (The history holds all 600 losses, so the order in which they
  // are pushed cannot matter; what could is a rule keyed on the position.)
  Sifter in_order(1.0, 1000, 9), shuffled(1.0, 1000, 9);
  std::mt19937_64 rng(3);
  std::exponential_distribution<double> loss(1.0);
  int64_t kept = 0, moved = 0;
  for (int64_t batch = 0; batch < 3; ++batch) {
    const int n = 200;
    std::vector<int64_t> idx(n), perm(n);
    std::vector<double> l(n);
    for (int i = 0; i < n; ++i) {
      idx[i] = 1000 + batch * n + i;
      l[i] = loss(rng);
      perm[i] = i;
    }
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int64_t> pidx(n);
    std::vector<double> pl(n);
    for (int i = 0; i < n; ++i) {
      pidx[i] = idx[perm[i]];
      pl[i] = l[perm[i]];
    }
    const auto want = in_order.select(idx, l, 1);
    const auto got = shuffled.select(pidx, pl, 1);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[i], want[perm[i]]) << "sample " << pidx[i] << " at position " << i;
      moved += got[i] != want[i];  // decisions by position do change
      kept += want[i];
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 600);
  EXPECT_GT(moved, 0) << "the permutation left every decision in place; the check proves nothing";
}

// The history holds sift.history losses besides the current global batch, so
// a global batch larger than sift.history does not push out everything older.
TEST(GlobalSelect, HistoryHoldsItsLengthBesidesTheCurrentGlobalBatch) {
  const int64_t history = 4, batch = 8;
  GlobalSelector sel(/*beta=*/1.0, history, batch, /*seed=*/3, "");
  std::vector<int64_t> idx(batch);
  for (int round = 0; round < 3; ++round) {
    for (int64_t i = 0; i < batch; ++i) idx[i] = round * batch + i;
    const torch::Tensor losses = torch::arange(batch, torch::kFloat32) + 100.0f * round;
    sel.select(idx, losses, /*epoch=*/0);
  }
  const std::vector<double> h = sel.sifter().history().ordered();
  ASSERT_EQ(static_cast<int64_t>(h.size()), history + batch);
  // Oldest first: the last `history` losses of round 1, then all of round 2.
  EXPECT_EQ(h.front(), 104.0);
  EXPECT_EQ(h.back(), 207.0);
}

// Each rank keeps its own rows of the samples the rule keeps; the decision
// depends on the sample, not on where it sits in the batch.
TEST(GlobalSelect, KeptRowsFollowTheSamplesWhateverTheirOrder) {
  const int64_t n = 64;
  std::vector<int64_t> idx(n), rev(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = 1000 + i, rev[i] = 1000 + n - 1 - i;
  const torch::Tensor losses = torch::rand({n}, torch::TensorOptions().dtype(torch::kFloat32));
  GlobalSelector a(1.0, 32, n, 5, ""), b(1.0, 32, n, 5, "");
  const auto da = a.select(idx, losses, 2);
  const auto db = b.select(rev, losses.flip(0), 2);
  std::vector<int64_t> kept_a, kept_b;
  for (int64_t r : da.rows) kept_a.push_back(idx[r]);
  for (int64_t r : db.rows) kept_b.push_back(rev[r]);
  std::sort(kept_b.begin(), kept_b.end());
  EXPECT_EQ(kept_a, kept_b);
  EXPECT_EQ(da.kept_global, static_cast<int64_t>(kept_a.size()));
  EXPECT_GT(da.kept_global, 0);
  EXPECT_LT(da.kept_global, n);
}

// Steps take pooled samples from the front, in the order they were added.
TEST(SamplePool, TakeReturnsTheOldestSamplesAndKeepsTheRest) {
  SamplePool pool;
  auto rows = [](int64_t first, int64_t n) {
    return torch::arange(first, first + n, torch::kLong);
  };
  pool.add(torch::zeros({3, 1, 2, 2}), rows(0, 3), torch::Tensor(), rows(10, 3));
  pool.add(torch::ones({4, 1, 2, 2}), rows(3, 4), torch::Tensor(), rows(20, 4));
  EXPECT_EQ(pool.size(), 7);
  const PoolTake t = pool.take(5);
  EXPECT_EQ(t.x.size(0), 5);
  EXPECT_FALSE(t.t.defined());
  EXPECT_TRUE(torch::equal(t.y, rows(0, 5)));
  EXPECT_EQ(pool.size(), 2);
  EXPECT_EQ(pool.indices(), (std::vector<int64_t>{22, 23}));
  EXPECT_TRUE(pool.logits().empty());
  const PoolTake rest = pool.take(2);
  EXPECT_TRUE(torch::equal(rest.i, torch::tensor({22, 23}, torch::kLong)));
  EXPECT_EQ(pool.size(), 0);
}
