// MPI tests, run at 2 and 3 ranks (and valid at 1).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "data/dataset.hpp"
#include "data/loader.hpp"
#include "dist/comm.hpp"
#include "dist/world.hpp"
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
  const int64_t S = 7;
  auto comm = make_communicator("mpi");
  std::vector<float> send(P * S), recv(S);
  for (int64_t i = 0; i < P * S; ++i) send[i] = static_cast<float>(i * (r + 1));
  comm->reduce_scatter_avg(send.data(), recv.data(), S);
  const double mean_factor = (P + 1) / 2.0;  // mean over ranks of (r + 1)
  for (int64_t i = 0; i < S; ++i) EXPECT_FLOAT_EQ(recv[i], float((r * S + i) * mean_factor));
  std::vector<float> buf(P * S, -1.0f);
  for (int64_t i = 0; i < S; ++i) buf[r * S + i] = float(r * 100 + i);
  comm->all_gather(buf.data(), S);
  for (int q = 0; q < P; ++q)
    for (int64_t i = 0; i < S; ++i) EXPECT_FLOAT_EQ(buf[q * S + i], float(q * 100 + i));
  // Volume: (P-1)/P of the padded buffer for each collective.
  EXPECT_EQ(comm->bytes_sent(), 2 * int64_t(P - 1) * S * 4);
}

// The sharded optimizer at P ranks equals one rank on the same global batch.
TEST(MpiZero, ShardedAdamWEqualsSingleRank) {
  const int P = world().size, r = world().rank;
  ModelSpec s;
  s.image_size = 8;
  s.channels = 1;
  s.patch = 4;
  s.dim = 10;
  s.depth = 1;
  s.heads = 2;
  s.mlp_ratio = 1.5;
  s.classes = 4;  // 1099 parameters
  ASSERT_NE(s.parameter_count() % 2, 0);
  ASSERT_NE(s.parameter_count() % 3, 0);
  torch::manual_seed(5);
  ViT dist_model(s);
  torch::manual_seed(5);
  ViT ref_model(s);
  FlatParams dist_flat(*dist_model, P), ref_flat(*ref_model, 1);
  auto comm = make_communicator("mpi");
  ShardedAdamW dist_opt(dist_flat, *comm, r);
  AdamW ref_opt(Shard{0, ref_flat.padded});
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  const int64_t G = 13;  // not divisible by 2 or 3: uneven slices, weighted losses
  for (int step = 0; step < 20; ++step) {
    torch::manual_seed(1000 + step);  // the same global batch on every rank
    auto x = torch::randn({G, 1, 8, 8});
    auto y = torch::randint(0, 4, {G}, torch::kLong);
    // Reference: the whole batch, one rank, clip at 1.
    ref_flat.zero_grad();
    torch::nn::functional::cross_entropy(ref_model->forward(x).logits, y).backward();
    const double ref_norm = ref_flat.grads.norm().item<double>();
    const float scale = ref_norm > 1.0 ? float(1.0 / (ref_norm + 1e-6)) : 1.0f;
    ref_opt.step(ref_flat.params.data_ptr<float>(), ref_flat.grads.data_ptr<float>(),
                 ref_flat.decay_mask.data_ptr<float>(), scale, h);
    // Sharded: this rank's slice (uneven when P does not divide G), weighted.
    const int64_t lo = r * G / P, hi = (r + 1) * G / P, n = hi - lo;
    dist_flat.zero_grad();
    const double weight = double(n) * P / double(G);
    (torch::nn::functional::cross_entropy(dist_model->forward(x.narrow(0, lo, n)).logits,
                                          y.narrow(0, lo, n)) * weight).backward();
    const double norm = dist_opt.step(h, 1.0);
    EXPECT_NEAR(norm, ref_norm, 1e-5 * ref_norm) << "step " << step;
  }
  const auto a = dist_flat.params.narrow(0, 0, dist_flat.numel);
  const auto b = ref_flat.params.narrow(0, 0, ref_flat.numel);
  const double rel = ((a - b).norm() / b.norm()).item<double>();
  EXPECT_LT(rel, 1e-5) << "relative difference after 20 steps: " << rel;
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-5 * b.abs().max().item<double>());
  // Optimizer memory shrinks as 1/P (plus padding).
  EXPECT_LE(dist_opt.state_bytes(), 2 * 4 * (ref_flat.numel / P + 16 * P));
}
