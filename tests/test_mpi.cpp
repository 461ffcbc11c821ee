// MPI tests, run at 2 and 3 ranks (and valid at 1). CTest runs each test
// on its own (--gtest_filter), so a failure names what broke.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "comm/comm.hpp"
#include "comm/world.hpp"
#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "distill/teacher_cache.hpp"
#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "io/timing_log.hpp"
#include "model/vit.hpp"
#include "optim/zero.hpp"
#include "util/torch_compat.hpp"

using namespace vitkd;
using vitkd::test::odd_spec;
using vitkd::test::TempDir;

// ---- what reaches MPI, counted at the MPI boundary --------------------------------
// The PMPI profiling interface: these definitions take the place of the MPI
// library's for every call in this binary (vitkd_lib included) and forward to
// PMPI_*. They count the bytes of this rank's data handed to the collectives
// the communicator uses, from each call's own count and datatype arguments:
// an independent measure of what Communicator::bytes_sent() reports.
namespace {
int64_t g_mpi_bytes = 0;
int64_t type_bytes(MPI_Datatype t) {
  int s = 0;
  PMPI_Type_size(t, &s);
  return s;
}
int64_t scatter_elems(const int counts[], MPI_Comm comm) {
  int p = 0;
  PMPI_Comm_size(comm, &p);
  int64_t n = 0;
  for (int q = 0; q < p; ++q) n += counts[q];
  return n;
}
}  // namespace

int MPI_Ireduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request* req) {
  g_mpi_bytes += scatter_elems(counts, comm) * type_bytes(type);
  return PMPI_Ireduce_scatter(send, recv, counts, type, op, comm, req);
}
int MPI_Reduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  g_mpi_bytes += scatter_elems(counts, comm) * type_bytes(type);
  return PMPI_Reduce_scatter(send, recv, counts, type, op, comm);
}
int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm) {
  g_mpi_bytes += send == MPI_IN_PLACE ? int64_t(recv_count) * type_bytes(recv_type)
                                      : int64_t(send_count) * type_bytes(send_type);
  return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

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

// Every rank's `mine` (the same length on every rank), in rank order.
std::vector<float> gather_floats(const std::vector<float>& mine) {
  std::vector<float> all(mine.size() * world().size);
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(),
                static_cast<int>(mine.size()), MPI_FLOAT, MPI_COMM_WORLD);
  return all;
}

// Rank r's share of a bucket of `total` elements: uneven when P does not divide it.
std::vector<int64_t> split(int64_t total, int P) {
  std::vector<int64_t> c(P);
  for (int q = 0; q < P; ++q) c[q] = total * (q + 1) / P - total * q / P;
  return c;
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

// ---- the communicator ---------------------------------------------------------------

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

// ---- ZeRO-1 --------------------------------------------------------------------------

namespace {
struct ZeroRun {
  torch::Tensor params;      // [numel] after the steps
  std::vector<double> norms; // global gradient norm per step
  std::vector<float> m, v;   // this rank's AdamW moments (its shard)
  int64_t bytes_per_step = 0, mpi_bytes_per_step = 0, padded = 0, shard = 0, state_bytes = 0,
          buckets = 0, launched_in_backward = 0;
};

// `steps` AdamW steps of the odd model on a fixed sequence of global batches
// of 13 samples; at world size 1 this is the single-rank reference.
ZeroRun run_zero(const BucketOptions& bopt, int steps = 20, const CommPlacement& where = CommPlacement()) {
  const int P = world().size, r = world().rank;
  torch::manual_seed(5);
  ViT model(odd_spec());
  FlatParams flat(*model, P);
  auto comm = make_communicator(Backend::Mpi, where);
  ShardedAdamW opt(flat, *model, *comm, r, bopt);
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  const int64_t G = 13;  // not divisible by 2 or 3: uneven slices, weighted losses
  ZeroRun out;
  for (int step = 0; step < steps; ++step) {
    const auto [x, y] = vitkd::test::odd_batch(step);  // the same global batch of G on every rank
    const int64_t lo = r * G / P, hi = (r + 1) * G / P, n = hi - lo;
    flat.zero_grad();
    const int64_t b0 = comm->bytes_sent(), m0 = g_mpi_bytes;  // buckets start during backward
    opt.begin_backward();
    const double weight = double(n) * P / double(G);
    (torch::nn::functional::cross_entropy(model->forward(x.narrow(0, lo, n)).logits,
                                          y.narrow(0, lo, n)) * weight).backward();
    out.norms.push_back(opt.step(h, 1.0));
    out.bytes_per_step = comm->bytes_sent() - b0;
    out.mpi_bytes_per_step = g_mpi_bytes - m0;
  }
  out.params = flat.params.narrow(0, 0, flat.numel).clone();
  out.padded = flat.padded;
  out.shard = opt.shard().size;
  out.state_bytes = opt.state_bytes();
  const torch::Tensor m = opt.adamw().m(), v = opt.adamw().v();
  out.m.assign(m.data_ptr<float>(), m.data_ptr<float>() + opt.shard().size);
  out.v.assign(v.data_ptr<float>(), v.data_ptr<float>() + opt.shard().size);
  out.buckets = opt.bucket_count();
  out.launched_in_backward = bopt.sharded ? opt.buckets().launched_in_backward() : 0;
  return out;
}

// The single-rank reference, computed on every rank without communication.
ZeroRun reference_run() {
  torch::manual_seed(5);
  ViT model(odd_spec());
  FlatParams flat(*model, 1);
  AdamW opt(Shard{0, flat.padded});
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  ZeroRun out;
  for (int step = 0; step < 20; ++step) {
    const auto [x, y] = vitkd::test::odd_batch(step);
    flat.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x).logits, y).backward();
    const double norm = flat.grads.norm().item<double>();
    const float scale = norm > 1.0 ? float(1.0 / (norm + 1e-6)) : 1.0f;
    opt.step(flat.params, flat.grads, flat.decay_mask, scale, h);
    out.norms.push_back(norm);
  }
  out.params = flat.params.narrow(0, 0, flat.numel).clone();
  out.padded = flat.padded;
  out.shard = flat.padded;
  out.state_bytes = opt.state_bytes();
  out.m.assign(opt.m().data_ptr<float>(), opt.m().data_ptr<float>() + flat.padded);
  out.v.assign(opt.v().data_ptr<float>(), opt.v().data_ptr<float>() + flat.padded);
  return out;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}
// The first n elements of a vector, as a double tensor.
torch::Tensor head(const std::vector<float>& v, int64_t n) {
  return torch::from_blob(const_cast<float*>(v.data()), {n}, torch::kFloat32).to(torch::kFloat64);
}
}  // namespace

// Buckets tile the buffer from its end, each inside one rank's shard (one
// reduce, one ncclReduce) unless a single bucket holds the whole buffer (one
// reduce-scatter); a parameter across a shard boundary completes both
// buckets it overlaps, so every bucket still starts during backward.
TEST(MpiZero, BucketsLieInsideOneShardOrAreTheWholeBuffer) {
  const int P = world().size, r = world().rank;
  for (int64_t bytes : {int64_t(25) << 20, int64_t(4096), int64_t(1000), int64_t(4)}) {
    torch::manual_seed(5);
    ViT model(odd_spec());
    FlatParams flat(*model, P);
    auto comm = make_communicator(Backend::Mpi);
    BucketOptions bopt;
    bopt.bucket_bytes = bytes;
    ShardedAdamW opt(flat, *model, *comm, r, bopt);
    const auto ranges = opt.buckets().ranges();
    int64_t end = flat.padded;
    const int64_t S = flat.padded / P;
    for (const Shard& b : ranges) {
      EXPECT_EQ(b.offset + b.size, end) << "bucket bytes " << bytes;  // contiguous, descending
      EXPECT_GT(b.size, 0);
      const bool whole = b.offset == 0 && b.size == flat.padded;
      EXPECT_TRUE(whole || b.offset / S == (b.offset + b.size - 1) / S)
          << "bucket [" << b.offset << ", " << b.offset + b.size << ") spans shards of " << S;
      end = b.offset;
    }
    EXPECT_EQ(end, 0);
    if (bytes >= flat.padded * 4) {
      EXPECT_EQ(ranges.size(), 1u);
    }
    // Every bucket completes during backward (hooks), none is left to finish().
    opt.begin_backward();
    torch::nn::functional::cross_entropy(model->forward(torch::randn({5, 1, 8, 8})).logits,
                                         torch::randint(0, 4, {5}, torch::kLong)).backward();
    EXPECT_EQ(opt.buckets().launched_in_backward(), static_cast<int64_t>(ranges.size())) << bytes;
    opt.step(AdamWHyper(), 1.0);
  }
}

// The step as it runs on a GPU, exercised on the CPU: gradients and
// parameters staged through separate host buffers around MPI (what the MPI
// backend does with device memory) and AdamW as tensor kernels (what runs on
// a device). It must give the host path's result: same global norms, and
// parameters and moments equal to 1e-6 relative (L2) after 20 steps.
TEST(MpiZero, DevicePathRunOnTheCpuEqualsTheHostPath) {
  for (int64_t bucket_bytes : {int64_t(25) << 20, int64_t(4096)}) {
    BucketOptions host;
    host.bucket_bytes = bucket_bytes;
    BucketOptions dev = host;
    dev.kernel = AdamWKernel::Tensor;
    CommPlacement staged;
    staged.stage = true;
    const ZeroRun a = run_zero(host), b = run_zero(dev, 20, staged);
    ASSERT_EQ(a.norms.size(), b.norms.size());
    // Step 0's norm is of the same gradients: equal to summation order. Later
    // norms are of parameters the two AdamW kernels rounded differently, held
    // to the parameters' own 1e-6 (below): with LibTorch 2.15's element-wise
    // kernels (FMA where 1.13 multiplied and added) they drift apart to 1.6e-7
    // by step 18. LibTorch's fused AdamW (2.4+) rounds in float where the
    // host kernel takes the bias corrections in double, and the model feeds
    // that back into the gradients: measured on LibTorch 2.15, norms 2.4e-6,
    // moments 6.8e-6 (m) and 1.6e-5 (v) apart after 20 steps, parameters
    // 1.00e-6 (an AVX2 AMD EPYC, 2026-12-03; within 1e-6 on an AMX Xeon), so
    // the parameters get the norms' 1e-5 there. A wrong update is off by
    // orders of magnitude more.
    const double later = has_fused_adamw() ? 1e-5 : 1e-6, moments = has_fused_adamw() ? 1e-4 : 1e-6;
    for (size_t k = 0; k < a.norms.size(); ++k)
      EXPECT_NEAR(b.norms[k], a.norms[k], (k == 0 ? 1e-9 : later) * a.norms[k]) << k;
    EXPECT_LE(rel_diff(b.params, a.params), later) << "bucket " << bucket_bytes;
    const int64_t n = static_cast<int64_t>(a.m.size());
    EXPECT_LE(rel_diff(head(b.m, n), head(a.m, n)), moments);
    EXPECT_LE(rel_diff(head(b.v, n), head(a.v, n)), moments);
    EXPECT_EQ(b.bytes_per_step, a.bytes_per_step);  // staging sends what it would send
  }
}

// The sharded optimizer at P ranks equals one rank on the same global batch,
// with one bucket and with many small buckets started during backward.
TEST(MpiZero, ShardedAdamWEqualsSingleRank) {
  ASSERT_NE(odd_spec().parameter_count() % 2, 0);
  ASSERT_NE(odd_spec().parameter_count() % 3, 0);
  const ZeroRun ref = reference_run();
  for (int64_t bucket_bytes : {int64_t(25) << 20, int64_t(256), int64_t(-1)}) {
    BucketOptions b;
    b.bucket_bytes = bucket_bytes;
    b.sharded = bucket_bytes > 0;  // -1: the unsharded allreduce baseline
    const ZeroRun z = run_zero(b);
    for (size_t i = 0; i < ref.norms.size(); ++i)
      EXPECT_NEAR(z.norms[i], ref.norms[i], 1e-5 * ref.norms[i]) << "step " << i;
    const double rel = rel_diff(z.params, ref.params);
    EXPECT_LT(rel, 1e-5) << "relative difference after 20 steps: " << rel << " (buckets "
                         << z.buckets << ")";
    EXPECT_LT((z.params - ref.params).abs().max().item<double>(), 1e-5 * ref.params.abs().max().item<double>());
    if (bucket_bytes == 256) {
      EXPECT_GT(z.buckets, 3);
      EXPECT_EQ(z.launched_in_backward, z.buckets);  // every bucket started from a hook
    }
    if (world().root())
      std::printf("[ zero ] P=%d %s buckets=%lld: relative difference to 1 rank after 20 steps %.2e\n",
                  world().size, b.sharded ? "zero1" : "allreduce", (long long)z.buckets, rel);
  }
}

// Each rank holds the moments of its own shard only: laid end to end in rank
// order they are the single-rank optimizer's moments, and the state bytes of
// all ranks add up to the unsharded optimizer's (so each holds 1/P of it;
// that state_bytes() is what AdamW allocates: AdamW.StateBytesAreTheBytesItAllocates).
TEST(MpiZero, MomentShardsOverRanksAreTheSingleRankMoments) {
  const int P = world().size;
  const ZeroRun ref = reference_run();
  const ZeroRun z = run_zero(BucketOptions());
  const int64_t numel = odd_spec().parameter_count();
  EXPECT_EQ(int64_t(z.m.size()), z.padded / P);
  const auto m = gather_floats(z.m), v = gather_floats(z.v);
  ASSERT_EQ(int64_t(m.size()), z.padded);
  const double dm = rel_diff(head(m, numel), head(ref.m, numel));
  const double dv = rel_diff(head(v, numel), head(ref.v, numel));
  EXPECT_LT(dm, 1e-4) << "first moments";
  EXPECT_LT(dv, 1e-4) << "second moments";
  for (int64_t i = numel; i < z.padded; ++i) ASSERT_EQ(m[i], 0.0f) << "padding element " << i;
  // The unsharded optimizer over the same (P-rank) padded buffer holds it all.
  BucketOptions unsharded;
  unsharded.sharded = false;
  const ZeroRun full = run_zero(unsharded, 1);
  const int64_t summed = static_cast<int64_t>(allreduce_sum(static_cast<double>(z.state_bytes)));
  EXPECT_EQ(summed, full.state_bytes) << "state bytes summed over ranks vs unsharded";
  const double ratio = double(z.state_bytes) / double(ref.state_bytes);
  EXPECT_LE(ratio, 1.0 / P + 0.03) << ratio;
  if (P == 3) {
    EXPECT_LE(ratio, 0.36);
  }
}

TEST(MpiZero, BytesPerStepAreTheBytesHandedToMpi) {
  for (WireType wire : {WireType::F32, WireType::BF16}) {
    BucketOptions b;
    b.bucket_bytes = 2048;
    b.wire = wire;
    const ZeroRun z = run_zero(b, 2);
    const int64_t elem = wire == WireType::BF16 ? 2 : 4;
    ASSERT_GT(z.buckets, 1);
    EXPECT_EQ(z.bytes_per_step, z.mpi_bytes_per_step) << "wire " << elem;
    // The whole padded gradient buffer once, in the wire type (bucket by
    // bucket), and this rank's shard of the parameters once, in fp32.
    EXPECT_EQ(z.mpi_bytes_per_step, z.padded * elem + z.shard * 4) << "wire " << elem;
  }
}

// bf16 on the wire stays close to fp32 over 20 steps.
TEST(MpiZero, Bf16WireStaysWithinToleranceOfFp32) {
  BucketOptions f32, b16;
  b16.wire = WireType::BF16;
  const ZeroRun a = run_zero(f32), b = run_zero(b16);
  const double rel = rel_diff(b.params, a.params);
  if (world().root())
    std::printf("[ zero ] P=%d: bf16 vs fp32 reduce, relative parameter difference after 20 steps %.2e\n",
                world().size, rel);
  EXPECT_LT(rel, 1e-3);
  if (world().size > 1) {
    EXPECT_GT(rel, 0.0) << "bf16 on the wire changed nothing";
  }
}

// ---- checkpoints written by P ranks ------------------------------------------------

namespace {
float m_at(int64_t i, int64_t numel) { return i < numel ? 0.25f + static_cast<float>(i) : 0.0f; }
float v_at(int64_t i, int64_t numel) { return i < numel ? 1.0f / static_cast<float>(i + 3) : 0.0f; }
}  // namespace

// Written collectively at P ranks, from sharded moments (each rank its
// 1/P) and from unsharded ones (every rank holds all); read back by every
// rank as each rank of Q = 1..5 ranks: the moments by range, the pooled
// samples to their own rank at Q = P and evenly split otherwise.
TEST(MpiCheckpoint, StateWrittenAtPRanksLoadsAtEveryRankCount) {
  const int P = world().size, r = world().rank;
  TempDir tmp(/*shared=*/true);
  torch::manual_seed(1);
  ViT model(odd_spec());
  FlatParams flat(*model, P);
  const int64_t numel = flat.numel;
  std::vector<int64_t> all_pooled;
  std::vector<float> all_logits;
  for (int q = 0; q < P; ++q)
    for (int k = 0; k <= q; ++k) {
      all_pooled.push_back(100 * q + k);
      for (int c = 0; c < 4; ++c) all_logits.push_back(static_cast<float>((100 * q + k) * 4 + c));
    }
  for (bool sharded : {true, false}) {
    const std::string path = tmp / (sharded ? "sharded.h5" : "unsharded.h5");
    const Shard sh = sharded ? flat.shard(r) : Shard{0, flat.padded};
    std::vector<float> m(sh.size), v(sh.size);
    for (int64_t j = 0; j < sh.size; ++j) {
      m[j] = m_at(sh.offset + j, numel);
      v[j] = v_at(sh.offset + j, numel);
    }
    OptimizerShard os{numel, flat.padded, sh, m.data(), v.data(), 9};
    TrainState st;
    st.global_batch = 12;
    st.sift_history = {1.0, 2.0};
    st.logit_dim = 4;
    for (int k = 0; k <= r; ++k) {
      st.pool_index.push_back(100 * r + k);
      for (int c = 0; c < 4; ++c) st.pool_logits.push_back(static_cast<float>((100 * r + k) * 4 + c));
    }
    CheckpointInfo info;
    info.spec = odd_spec();
    info.step = 7;
    info.world_size = P;
    info.mode = "teacher";
    save_training_checkpoint(path, model, info, st, os);

    for (int Q = 1; Q <= 5; ++Q) {
      const FlatParams layout(*ViT(odd_spec()), Q);
      std::vector<int64_t> pooled;
      std::vector<float> logits;
      for (int q = 0; q < Q; ++q) {
        const Shard s = layout.shard(q);
        std::vector<float> mq(s.size, -1.0f), vq(s.size, -1.0f);
        OptimizerShard oq{numel, layout.padded, s, mq.data(), vq.data(), 0};
        ViT mdl(odd_spec());
        const TrainState rs = load_training_checkpoint(path, mdl, oq, q, Q);
        for (int64_t j = 0; j < s.size; ++j) {
          ASSERT_EQ(mq[j], m_at(s.offset + j, numel)) << "Q " << Q << " rank " << q << " element " << s.offset + j;
          ASSERT_EQ(vq[j], v_at(s.offset + j, numel)) << "Q " << Q << " rank " << q << " element " << s.offset + j;
        }
        EXPECT_EQ(oq.adam_steps, 9);
        EXPECT_EQ(rs.sift_history, st.sift_history);
        if (Q == P) {  // back to the rank that pooled them
          std::vector<int64_t> own;
          for (int k = 0; k <= q; ++k) own.push_back(100 * q + k);
          EXPECT_EQ(rs.pool_index, own) << "rank " << q;
        }
        pooled.insert(pooled.end(), rs.pool_index.begin(), rs.pool_index.end());
        logits.insert(logits.end(), rs.pool_logits.begin(), rs.pool_logits.end());
      }
      EXPECT_EQ(pooled, all_pooled) << "Q " << Q;
      EXPECT_EQ(logits, all_logits) << "Q " << Q;
    }
    // The weights are rank 0's, whole.
    ViT back(odd_spec());
    load_checkpoint_weights(path, back);
    for (const auto& p : model->named_parameters())
      EXPECT_TRUE(torch::equal(p.value(), back->named_parameters()[p.key()])) << p.key();
  }
  barrier();
}

// ---- teacher-logit cache and timing log across ranks ---------------------------------

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

TEST(MpiTimingLog, EachRankWritesItsOwnColumnAndRankZeroTheMetrics) {
  const int P = world().size, r = world().rank;
  TempDir tmp(/*shared=*/true);
  const std::string path = tmp / "timing.h5";
  {
    TimingLogAttrs a;
    a.mode = RunMode::Teacher;
    TimingLog log(path, a, 2);
    for (int64_t s = 1; s <= 5; ++s) {
      std::array<double, kNumPhases> ph{};
      for (int i = 0; i < kNumPhases; ++i) ph[i] = r * 1000.0 + s * 10.0 + i;
      StepMetrics m;
      m.step = s;
      m.loss = 0.5 * s;
      log.record(ph, r * 100.0 + s, m);
    }
    log.record_eval(5, 0, 0.25);
    log.flush();
  }
  barrier();
  if (world().root()) {
    H5Obj f = h5_open_read(path, "timing log");
    EXPECT_EQ(h5_attr_int(f, "world_size"), P);
    EXPECT_EQ(static_cast<int>(h5_attr_strings(f, "hostnames").size()), P);
    EXPECT_EQ(h5_dataset_info(f, "/step_seconds").dims, (std::vector<int64_t>{5, P, kNumPhases}));
    std::vector<double> ph, wall, loss;
    std::vector<int64_t> step, eval_step;
    h5_read(f, "/step_seconds", ph);
    h5_read(f, "/step_wall_seconds", wall);
    h5_read(f, "/metrics/step", step);
    h5_read(f, "/metrics/loss", loss);
    h5_read(f, "/eval/step", eval_step);
    for (int64_t s = 1; s <= 5; ++s)
      for (int q = 0; q < P; ++q) {
        EXPECT_EQ(wall[(s - 1) * P + q], q * 100.0 + s) << "step " << s << " rank " << q;
        for (int i = 0; i < kNumPhases; ++i)
          EXPECT_EQ(ph[((s - 1) * P + q) * kNumPhases + i], q * 1000.0 + s * 10.0 + i);
      }
    EXPECT_EQ(step, (std::vector<int64_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(loss, (std::vector<double>{0.5, 1, 1.5, 2, 2.5}));
    EXPECT_EQ(eval_step, std::vector<int64_t>{5});
  }
  barrier();
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
