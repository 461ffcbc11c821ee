// The teacher-logit cache across ranks (distill/teacher_cache.hpp),
// run at 2 and 3 ranks (and valid at 1). CTest runs each test on its own
// (--gtest_filter), so a failure names what broke.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/world.hpp"
#include "distill/teacher_cache.hpp"

using namespace vitkd;

TEST(MpiTeacherCache, RowsComputedOnOneRankServeEveryRank) {
  const int P = world().size, r = world().rank;
  const int64_t N = 20, K = 3;
  auto logits_of = [&](const std::vector<int64_t>& rows) {
    auto t = torch::empty({static_cast<int64_t>(rows.size()), K});
    for (size_t i = 0; i < rows.size(); ++i)
      for (int64_t c = 0; c < K; ++c) t[i][c] = static_cast<float>(rows[i] * 10 + c);
    return t;
  };
  TeacherCache cache(N, K, "teacher", "data.h5");
  // Rank r computed the samples i = r (mod P) with i < 15.
  std::vector<int64_t> mine;
  for (int64_t i = r; i < 15; i += P) mine.push_back(i);
  cache.share(torch::tensor(mine, torch::kLong), logits_of(mine));
  EXPECT_EQ(cache.filled(), 15);
  // Only the last rank computes anything in this step; the others still call.
  if (r == P - 1) {
    std::vector<int64_t> late{15, 19};
    cache.share(torch::tensor(late, torch::kLong), logits_of(late));
  } else {
    cache.share(torch::Tensor(), torch::Tensor());
  }
  EXPECT_EQ(cache.filled(), 17);
  std::vector<int64_t> ask{19, 0, 14, 15, 1};
  auto got = cache.lookup(torch::tensor(ask, torch::kLong));
  ASSERT_TRUE(got.defined()) << "rank " << r;
  EXPECT_TRUE(torch::equal(got, logits_of(ask))) << "rank " << r;
  EXPECT_FALSE(cache.lookup(torch::tensor(std::vector<int64_t>{16}, torch::kLong)).defined());
}
