#include <gtest/gtest.h>

#include <random>

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

TEST(Sift, HistoryPercentileAndRing) {
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
}
