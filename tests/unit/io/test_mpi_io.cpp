// Checkpoints written by P ranks (io/checkpoint.hpp) and the timing log's per-rank
// columns (io/timing_log.hpp),
// run at 2 and 3 ranks (and valid at 1). CTest runs each test on its own
// (--gtest_filter), so a failure names what broke.
#include <gtest/gtest.h>
#include <mpi.h>

#include <array>
#include <vector>

#include "comm/world.hpp"
#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "io/timing_log.hpp"
#include "model/vit.hpp"

using namespace vitkd;
using vitkd::test::odd_spec;
using vitkd::test::TempDir;

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
