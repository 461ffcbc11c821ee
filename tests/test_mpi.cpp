// MPI tests, run at 2 and 3 ranks (and valid at 1).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "comm/comm.hpp"
#include "comm/world.hpp"
#include "model/vit.hpp"
#include "optim/zero.hpp"

using namespace vitkd;

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

std::string shared_tmp(const std::string& name) {
  int64_t pid = getpid();
  broadcast_bytes(&pid, sizeof pid, 0);
  return "/tmp/vitkd_mpitest_" + std::to_string(pid) + "_" + name;
}
}  // namespace

TEST(MpiLoader, EverySampleExactlyOncePerEpochAcrossRanks) {
  const std::string p = shared_tmp("loader.h5");
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
  if (world().root()) std::remove(p.c_str());
}

TEST(MpiComm, ReduceScatterAverageAndAllGather) {
  const int P = world().size, r = world().rank;
  auto comm = make_communicator("mpi");
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
  // bf16 on the wire: exact for small integers.
  id = comm->start_reduce_scatter(send.data(), recv.data(), counts, WireType::BF16);
  comm->wait(id);
  for (int64_t i = 0; i < counts[r]; ++i) EXPECT_FLOAT_EQ(recv[i], float((3 * r + i) * mean_factor));
  const int64_t S = 7;
  std::vector<float> buf(P * S, -1.0f);
  for (int64_t i = 0; i < S; ++i) buf[r * S + i] = float(r * 100 + i);
  comm->all_gather(buf.data(), S);
  for (int q = 0; q < P; ++q)
    for (int64_t i = 0; i < S; ++i) EXPECT_FLOAT_EQ(buf[q * S + i], float(q * 100 + i));
}

namespace {
ModelSpec odd_model() {
  ModelSpec s;
  s.image_size = 8;
  s.channels = 1;
  s.patch = 4;
  s.dim = 10;
  s.depth = 1;
  s.heads = 2;
  s.mlp_ratio = 1.5;
  s.classes = 4;  // 1099 parameters: divisible by neither 2 nor 3
  return s;
}

struct ZeroRun {
  torch::Tensor params;      // [numel] after the steps
  std::vector<double> norms; // global gradient norm per step
  int64_t bytes_per_step = 0, padded = 0, state_bytes = 0, buckets = 0, launched_in_backward = 0;
};

// `steps` AdamW steps of the odd model on a fixed sequence of global batches
// of 13 samples; at world size 1 this is the single-rank reference.
ZeroRun run_zero(const BucketOptions& bopt, int steps = 20) {
  const int P = world().size, r = world().rank;
  torch::manual_seed(5);
  ViT model(odd_model());
  FlatParams flat(*model, P);
  auto comm = make_communicator("mpi");
  ShardedAdamW opt(flat, *model, *comm, r, bopt);
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  const int64_t G = 13;  // not divisible by 2 or 3: uneven slices, weighted losses
  ZeroRun out;
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(1000 + step);  // the same global batch on every rank
    auto x = torch::randn({G, 1, 8, 8});
    auto y = torch::randint(0, 4, {G}, torch::kLong);
    const int64_t lo = r * G / P, hi = (r + 1) * G / P, n = hi - lo;
    flat.zero_grad();
    const int64_t b0 = comm->bytes_sent();  // buckets start during backward
    opt.begin_backward();
    const double weight = double(n) * P / double(G);
    (torch::nn::functional::cross_entropy(model->forward(x.narrow(0, lo, n)).logits,
                                          y.narrow(0, lo, n)) * weight).backward();
    out.norms.push_back(opt.step(h, 1.0));
    out.bytes_per_step = comm->bytes_sent() - b0;
  }
  out.params = flat.params.narrow(0, 0, flat.numel).clone();
  out.padded = flat.padded;
  out.state_bytes = opt.state_bytes();
  out.buckets = opt.bucket_count();
  out.launched_in_backward = bopt.sharded ? opt.buckets().launched_in_backward() : 0;
  return out;
}

// The single-rank reference, computed on every rank without communication.
ZeroRun reference_run() {
  torch::manual_seed(5);
  ViT model(odd_model());
  FlatParams flat(*model, 1);
  AdamW opt(Shard{0, flat.padded});
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  ZeroRun out;
  for (int step = 0; step < 20; ++step) {
    torch::manual_seed(1000 + step);
    auto x = torch::randn({13, 1, 8, 8});
    auto y = torch::randint(0, 4, {13}, torch::kLong);
    flat.zero_grad();
    torch::nn::functional::cross_entropy(model->forward(x).logits, y).backward();
    const double norm = flat.grads.norm().item<double>();
    const float scale = norm > 1.0 ? float(1.0 / (norm + 1e-6)) : 1.0f;
    opt.step(flat.params.data_ptr<float>(), flat.grads.data_ptr<float>(),
             flat.decay_mask.data_ptr<float>(), scale, h);
    out.norms.push_back(norm);
  }
  out.params = flat.params.narrow(0, 0, flat.numel).clone();
  out.padded = flat.padded;
  out.state_bytes = opt.state_bytes();
  return out;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}
}  // namespace

// The sharded optimizer at P ranks equals one rank on the same global batch,
// with one bucket and with many small buckets started during backward.
TEST(MpiZero, ShardedAdamWEqualsSingleRank) {
  ASSERT_NE(odd_model().parameter_count() % 2, 0);
  ASSERT_NE(odd_model().parameter_count() % 3, 0);
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

TEST(MpiZero, OptimizerMemoryShrinksAsOneOverP) {
  const ZeroRun ref = reference_run();
  const ZeroRun z = run_zero(BucketOptions(), 1);
  const double ratio = double(z.state_bytes) / double(ref.state_bytes);
  EXPECT_LE(ratio, 1.0 / world().size + 0.03) << ratio;
  if (world().size == 3) EXPECT_LE(ratio, 0.36);
}

TEST(MpiZero, BytesPerStepAreReduceScatterPlusAllGather) {
  const int P = world().size;
  for (WireType wire : {WireType::F32, WireType::BF16}) {
    BucketOptions b;
    b.bucket_bytes = 2048;
    b.wire = wire;
    const ZeroRun z = run_zero(b, 2);
    const int64_t elem = wire == WireType::BF16 ? 2 : 4;
    // Ring volumes: (P-1)/P of the padded buffer for the reduce-scatter (in the
    // wire type) plus (P-1)/P of it for the fp32 all-gather.
    const int64_t expect = (P - 1) * z.padded * elem / P + (P - 1) * z.padded * 4 / P;
    EXPECT_NEAR(double(z.bytes_per_step), double(expect), double(z.buckets)) << "wire " << elem;
  }
}

// bf16 on the wire stays close to fp32 over 20 steps.
TEST(MpiZero, Bf16ReduceWithinToleranceOfFp32) {
  BucketOptions f32, b16;
  b16.wire = WireType::BF16;
  const ZeroRun a = run_zero(f32), b = run_zero(b16);
  const double rel = rel_diff(b.params, a.params);
  if (world().root())
    std::printf("[ zero ] P=%d: bf16 vs fp32 reduce, relative parameter difference after 20 steps %.2e\n",
                world().size, rel);
  EXPECT_LT(rel, 1e-3);
}
