// The communicator (comm/comm.hpp) and the MPI world (comm/world.hpp),
// run at 2 and 3 ranks (and valid at 1). CTest runs each test on its own
// (--gtest_filter), so a failure names what broke.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/comm.hpp"
#include "comm/world.hpp"
#include "mpi_bytes.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;
using vitkd::test::g_mpi_bytes;

namespace {
// Rank r's share of a bucket of `total` elements: uneven when P does not divide it.
std::vector<int64_t> split(int64_t total, int P) {
  std::vector<int64_t> c(P);
  for (int q = 0; q < P; ++q) c[q] = total * (q + 1) / P - total * q / P;
  return c;
}
}  // namespace

TEST(MpiComm, ReduceScatterAveragesOverRanks) {
  const int P = world().size, r = world().rank;
  auto comm = make_communicator(Backend::Mpi);
  // A bucket of 3P+1 elements split unevenly: rank q gets 3 (+1 for the last).
  std::vector<int64_t> counts(P, 3);
  counts[P - 1] += 1;
  const int64_t total = 3 * P + 1;
  std::vector<float> send(total);
  for (int64_t i = 0; i < total; ++i) send[i] = static_cast<float>(i * (r + 1));
  std::vector<float> recv(counts[r]);
  int id = comm->start_reduce_scatter(send.data(), recv.data(), counts, WireType::F32);
  comm->progress();
  comm->wait(id);
  const double mean_factor = (P + 1) / 2.0;  // mean over ranks of (r + 1)
  for (int64_t i = 0; i < counts[r]; ++i) EXPECT_FLOAT_EQ(recv[i], float((3 * r + i) * mean_factor));
  // bf16 on the wire: exact for these small integers (that bf16 rounds at
  // all is the next test's subject).
  id = comm->start_reduce_scatter(send.data(), recv.data(), counts, WireType::BF16);
  comm->wait(id);
  for (int64_t i = 0; i < counts[r]; ++i) EXPECT_FLOAT_EQ(recv[i], float((3 * r + i) * mean_factor));
}

namespace {
// bf16 arithmetic from torch (round to nearest even), independent of vitkd's
// own conversion: a value rounded to bf16, and a sum of bf16 values in a
// given order, each addition rounded to bf16.
float bf16(float x) {
  return torch::scalar_tensor(x, torch::kFloat32).to(torch::kBFloat16).to(torch::kFloat32).item<float>();
}
float bf16_sum(const std::vector<float>& v) {
  auto acc = torch::scalar_tensor(v[0], torch::kFloat32).to(torch::kBFloat16);
  for (size_t k = 1; k < v.size(); ++k)
    acc = acc + torch::scalar_tensor(v[k], torch::kFloat32).to(torch::kBFloat16);
  return acc.to(torch::kFloat32).item<float>();
}
}  // namespace

TEST(MpiComm, Bf16ReduceScatterRoundsLikeABf16Sum) {
  // Values bf16 cannot hold or whose bf16 sum must round: the result must be
  // the bf16 sum (torch's), divided by P in fp32, and not the fp32 mean a
  // silent fp32 fallback would give.
  const int P = world().size, r = world().rank;
  if (P < 2) GTEST_SKIP() << "needs 2 or more ranks";
  const float u7 = 1.0f / 128, u9 = 1.0f / 512;  // 2^-7: bf16's spacing at 1
  // value(pattern, rank)
  const std::vector<std::function<float(int)>> patterns = {
      [&](int) { return 1 + u9; },                    // rounds to 1 when converted
      [&](int) { return 1 + 3 * u9; },                // rounds up to 1 + 2^-7
      [&](int q) { return q == 0 ? 1.0f : 1 + u7; },  // sums to 2 + 2^-7 at P = 2: a tie, to 2
      [&](int) { return 1 + u7; },                    // exact; 3 of them round (3 + 3*2^-7)
      [&](int) { return 3 + 2 * u7; },                // exact; 3 of them round (9 + 3*2^-6)
  };
  // A pattern is used when every order of the P additions gives the same bf16
  // sum (MPI may add in any order) and that sum differs from the exact one;
  // the expected mean is that sum / P.
  std::vector<float> want_bf16, want_f32;
  std::vector<size_t> used;
  bool conversion_rounds = false, sum_rounds = false;
  for (size_t k = 0; k < patterns.size(); ++k) {
    std::vector<int> order(P);
    std::iota(order.begin(), order.end(), 0);
    std::vector<float> sums;
    do {
      std::vector<float> v;
      for (int q : order) v.push_back(patterns[k](q));
      sums.push_back(bf16_sum(v));
    } while (std::next_permutation(order.begin(), order.end()));
    if (std::adjacent_find(sums.begin(), sums.end(), std::not_equal_to<float>()) != sums.end()) continue;
    double exact = 0, exact_of_rounded = 0;
    for (int q = 0; q < P; ++q) {
      exact += patterns[k](q);
      exact_of_rounded += bf16(patterns[k](q));
    }
    if (double(sums[0]) == exact) continue;  // bf16 holds this sum: it cannot tell bf16 from fp32
    conversion_rounds |= exact_of_rounded != exact;
    sum_rounds |= double(sums[0]) != exact_of_rounded;
    used.push_back(k);
    want_bf16.push_back(sums[0] * (1.0f / static_cast<float>(P)));
    want_f32.push_back(static_cast<float>(exact) * (1.0f / static_cast<float>(P)));
    ASSERT_NE(want_bf16.back(), want_f32.back()) << "pattern " << k;
  }
  ASSERT_TRUE(conversion_rounds && sum_rounds) << "the data must exercise both roundings";

  auto comm = make_communicator(Backend::Mpi);
  const int64_t total = 4 * P * static_cast<int64_t>(used.size()) + 1;
  const auto counts = split(total, P);
  int64_t first = 0;
  for (int q = 0; q < r; ++q) first += counts[q];
  std::vector<float> send(total), recv(counts[r]);
  for (int64_t j = 0; j < total; ++j) send[j] = patterns[used[j % used.size()]](r);
  for (WireType wire : {WireType::BF16, WireType::F32}) {
    std::fill(recv.begin(), recv.end(), -1.0f);
    comm->wait(comm->start_reduce_scatter(send.data(), recv.data(), counts, wire));
    const auto& want = wire == WireType::BF16 ? want_bf16 : want_f32;
    for (int64_t i = 0; i < counts[r]; ++i)
      EXPECT_EQ(recv[i], want[(first + i) % used.size()])
          << (wire == WireType::BF16 ? "bf16" : "fp32") << " wire, element " << first + i
          << ", pattern " << used[(first + i) % used.size()];
  }
}

TEST(MpiComm, AllGatherCollectsEveryRanksBlock) {
  const int P = world().size, r = world().rank;
  auto comm = make_communicator(Backend::Mpi);
  const int64_t S = 7;
  std::vector<float> buf(P * S, -1.0f);
  for (int64_t i = 0; i < S; ++i) buf[r * S + i] = float(r * 100 + i);
  comm->all_gather(buf.data(), S);
  for (int q = 0; q < P; ++q)
    for (int64_t i = 0; i < S; ++i) EXPECT_FLOAT_EQ(buf[q * S + i], float(q * 100 + i));
}

TEST(MpiComm, BytesSentAreTheBytesHandedToMpi) {
  const int P = world().size, r = world().rank;
  auto comm = make_communicator(Backend::Mpi);
  const int64_t total = 5 * P + 2;
  const auto counts = split(total, P);
  std::vector<float> send(total, 1.0f), recv(counts[r]);
  for (WireType wire : {WireType::F32, WireType::BF16, WireType::F32}) {
    const int64_t b0 = comm->bytes_sent(), m0 = g_mpi_bytes;
    comm->wait(comm->start_reduce_scatter(send.data(), recv.data(), counts, wire));
    EXPECT_EQ(comm->bytes_sent() - b0, g_mpi_bytes - m0);
    // The whole bucket leaves in the wire type: 4 bytes an element, or 2.
    EXPECT_EQ(g_mpi_bytes - m0, total * (wire == WireType::BF16 ? 2 : 4));
  }
  const int64_t S = 9;
  std::vector<float> buf(P * S, 0.0f);
  const int64_t b0 = comm->bytes_sent(), m0 = g_mpi_bytes;
  comm->all_gather(buf.data(), S);
  EXPECT_EQ(comm->bytes_sent() - b0, g_mpi_bytes - m0);
  EXPECT_EQ(g_mpi_bytes - m0, S * 4);  // this rank's block, fp32
}

// MPI is initialised for calls from one thread at a time, not only the main
// thread: on CUDA, LibTorch runs the bucket hooks on its autograd thread.
TEST(MpiWorld, ThreadLevelIsSerializedAndWhatTheLibraryGranted) {
  int level = -1;
  ASSERT_EQ(MPI_Query_thread(&level), MPI_SUCCESS);
  EXPECT_EQ(vitkd::world().thread_level, level);
  EXPECT_GE(level, MPI_THREAD_SERIALIZED);
  EXPECT_TRUE(vitkd::world().mpi_serialized);
}
