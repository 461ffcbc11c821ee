// Checkpoints in-process, at one rank: a training checkpoint reads back
// field by field; optimizer moments written for one padding load by range at
// any other rank count; pooled samples go back to their rank or are split
// evenly; weights-only and foreign checkpoints are refused; publishing keeps
// the newest step files. (Written by several ranks: test_mpi_io.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iterator>

#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "util/error.hpp"

using namespace vitkd;
using vitkd::test::odd_spec;
using vitkd::test::Spec;
using vitkd::test::TempDir;
using vitkd::test::user_error_of;

namespace {
// Moments as a function of the global flat index (zero in the padding, as
// AdamW leaves it: the padding's gradient is always zero).
float m_at(int64_t i, int64_t numel) { return i < numel ? 0.25f + static_cast<float>(i) : 0.0f; }
float v_at(int64_t i, int64_t numel) { return i < numel ? 1.0f / static_cast<float>(i + 3) : 0.0f; }

// Training state with every field away from its default.
TrainState some_state() {
  TrainState st;
  st.seed = 0x1234567890ULL;
  st.global_batch = 13;
  st.data_epoch = 3;
  st.data_batch = 2;
  st.samples_seen = 1000;
  st.samples_trained = 900;
  st.samples_kept = 800;
  st.teacher_forwards = 700;
  st.bad_steps = 1;
  st.train_seconds = 12.5;
  st.eval_seconds = 2.25;
  st.complete = true;
  st.top1_per_epoch = {0.5, 0.6, 0.625};
  st.evaluations = {{10, 0, 130, 3.5, 4.0, 0.5}, {25, 1, 325, 7.25, 8.5, 0.6},
                    {42, 2, 546, 10.25, 12.5, 0.625}};
  st.sift_history = {3.0, 1.0, 2.0, 0.5};
  st.pool_index = {7, 3, 11, 40, 2};
  st.logit_dim = 4;
  for (int64_t i = 0; i < 5 * 4; ++i) st.pool_logits.push_back(0.5f * static_cast<float>(i) - 3.0f);
  return st;
}

CheckpointInfo some_info(const ModelSpec& s) {
  CheckpointInfo info;
  info.spec = s;
  info.step = 42;
  info.epoch = 3;
  info.world_size = 1;
  info.mode = "distill";
  info.config = "[run]\nseed = 5\n";
  info.test_top1 = 0.625;
  return info;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

TEST(Checkpoint, TrainingCheckpointReadsBackEveryField) {
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  const std::string path = tmp / "checkpoint-step00000042.h5";
  torch::manual_seed(1);
  ViT model(odd_spec());
  FlatParams flat(*model, 1);
  std::vector<float> m(flat.padded), v(flat.padded);
  for (int64_t i = 0; i < flat.padded; ++i) {
    m[i] = m_at(i, flat.numel);
    v[i] = v_at(i, flat.numel);
  }
  OptimizerShard os{flat.numel, flat.padded, flat.shard(0), m.data(), v.data(), 17};
  const TrainState st = some_state();
  save_training_checkpoint(path, model, some_info(odd_spec()), st, os);
  struct stat sb {};
  EXPECT_NE(stat((path + ".tmp").c_str(), &sb), 0) << "the temporary file was left behind";

  const CheckpointInfo ri = read_checkpoint_info(path);
  EXPECT_EQ(ri.step, 42);
  EXPECT_EQ(ri.epoch, 3);
  EXPECT_EQ(ri.world_size, 1);
  EXPECT_EQ(ri.mode, "distill");
  EXPECT_EQ(ri.config, "[run]\nseed = 5\n");
  EXPECT_EQ(ri.test_top1, 0.625);
  EXPECT_TRUE(ri.has_state);
  EXPECT_EQ(ri.spec.describe(), odd_spec().describe());

  // Into a model with other weights and moments that hold garbage.
  torch::manual_seed(2);
  ViT other(odd_spec());
  FlatParams oflat(*other, 1);
  ASSERT_FALSE(torch::equal(oflat.params, flat.params));
  std::vector<float> m2(flat.padded, -7.0f), v2(flat.padded, -7.0f);
  OptimizerShard os2{oflat.numel, oflat.padded, oflat.shard(0), m2.data(), v2.data(), 0};
  const TrainState rs = load_training_checkpoint(path, other, os2, 0, 1);

  auto a = model->named_parameters(), b = other->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), b[p.key()])) << p.key();
  EXPECT_EQ(m2, m);
  EXPECT_EQ(v2, v);
  EXPECT_EQ(os2.adam_steps, 17);
  EXPECT_EQ(rs.seed, st.seed);
  EXPECT_EQ(rs.global_batch, st.global_batch);
  EXPECT_EQ(rs.data_epoch, st.data_epoch);
  EXPECT_EQ(rs.data_batch, st.data_batch);
  EXPECT_EQ(rs.samples_seen, st.samples_seen);
  EXPECT_EQ(rs.samples_trained, st.samples_trained);
  EXPECT_EQ(rs.samples_kept, st.samples_kept);
  EXPECT_EQ(rs.teacher_forwards, st.teacher_forwards);
  EXPECT_EQ(rs.bad_steps, st.bad_steps);
  EXPECT_EQ(rs.train_seconds, st.train_seconds);
  EXPECT_EQ(rs.complete, st.complete);
  EXPECT_EQ(rs.top1_per_epoch, st.top1_per_epoch);
  EXPECT_EQ(rs.eval_seconds, st.eval_seconds);
  ASSERT_EQ(rs.evaluations.size(), st.evaluations.size());
  for (size_t i = 0; i < st.evaluations.size(); ++i) {
    const EvalRecord &x = rs.evaluations[i], &y = st.evaluations[i];
    EXPECT_EQ(x.step, y.step) << i;
    EXPECT_EQ(x.epoch, y.epoch) << i;
    EXPECT_EQ(x.samples_seen, y.samples_seen) << i;
    EXPECT_EQ(x.train_seconds, y.train_seconds) << i;
    EXPECT_EQ(x.elapsed_seconds, y.elapsed_seconds) << i;
    EXPECT_EQ(x.test_top1, y.test_top1) << i;
  }
  EXPECT_EQ(rs.sift_history, st.sift_history);
  EXPECT_EQ(rs.pool_index, st.pool_index);
  EXPECT_EQ(rs.logit_dim, st.logit_dim);
  EXPECT_EQ(rs.pool_logits, st.pool_logits);
}

TEST(Checkpoint, OlderCheckpointsWithoutEvaluationsLoadWithNone) {
  TempDir tmp;
  const std::string path = tmp / "old.h5";
  torch::manual_seed(1);
  ViT model(odd_spec());
  FlatParams flat(*model, 1);
  std::vector<float> m(flat.padded, 0.0f), v(flat.padded, 0.0f);
  OptimizerShard os{flat.numel, flat.padded, flat.shard(0), m.data(), v.data(), 1};
  save_training_checkpoint(path, model, some_info(odd_spec()), some_state(), os);
  {  // what a checkpoint written before evaluations were recorded lacks
    H5Obj f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_GE(H5Ldelete(f, "/state/evaluations", H5P_DEFAULT), 0);
    ASSERT_GE(H5Adelete(f, "eval_seconds"), 0);
  }
  const TrainState rs = load_training_checkpoint(path, model, os, 0, 1);
  EXPECT_TRUE(rs.evaluations.empty());
  EXPECT_EQ(rs.eval_seconds, 0.0);
  EXPECT_EQ(rs.top1_per_epoch, some_state().top1_per_epoch);

  {  // a malformed one is named
    H5Obj f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    std::vector<double> rows(8, 0.0);
    h5_write(f, "/state/evaluations", rows.data(), {2, 4});
  }
  const auto e = user_error_of([&] { load_training_checkpoint(path, model, os, 0, 1); });
  EXPECT_NE(e.find("/state/evaluations"), std::string::npos) << e;
}

TEST(Checkpoint, MomentsLoadByRangeAtAnyRankCountAndPoolsSplitEvenly) {
  // Written with the padding of a 2-rank run (one writer holds all of it);
  // loaded as rank q of Q for Q = 1..5, each rank with its own padding.
  TempDir tmp;
  const std::string path = tmp / "ck.h5";
  torch::manual_seed(1);
  ViT model(odd_spec());
  const int64_t numel = odd_spec().parameter_count();
  const int64_t padded2 = FlatParams(*ViT(odd_spec()), 2).padded;
  std::vector<float> m(padded2), v(padded2);
  for (int64_t i = 0; i < padded2; ++i) {
    m[i] = m_at(i, numel);
    v[i] = v_at(i, numel);
  }
  OptimizerShard os{numel, padded2, Shard{0, padded2}, m.data(), v.data(), 5};
  const TrainState st = some_state();
  save_training_checkpoint(path, model, some_info(odd_spec()), st, os);

  for (int Q = 1; Q <= 5; ++Q) {
    const FlatParams layout(*ViT(odd_spec()), Q);
    std::vector<int64_t> pooled;
    std::vector<float> pooled_logits;
    int64_t smallest = INT64_MAX, largest = 0;
    for (int q = 0; q < Q; ++q) {
      const Shard sh = layout.shard(q);
      std::vector<float> mq(sh.size, -1.0f), vq(sh.size, -1.0f);
      OptimizerShard oq{numel, layout.padded, sh, mq.data(), vq.data(), 0};
      ViT mdl(odd_spec());
      const TrainState rs = load_training_checkpoint(path, mdl, oq, q, Q);
      for (int64_t j = 0; j < sh.size; ++j) {
        const int64_t g = sh.offset + j;
        ASSERT_EQ(mq[j], m_at(g, numel)) << "Q " << Q << " rank " << q << " element " << g;
        ASSERT_EQ(vq[j], v_at(g, numel)) << "Q " << Q << " rank " << q << " element " << g;
      }
      EXPECT_EQ(oq.adam_steps, 5);
      pooled.insert(pooled.end(), rs.pool_index.begin(), rs.pool_index.end());
      pooled_logits.insert(pooled_logits.end(), rs.pool_logits.begin(), rs.pool_logits.end());
      smallest = std::min<int64_t>(smallest, rs.pool_index.size());
      largest = std::max<int64_t>(largest, rs.pool_index.size());
    }
    // Every pooled sample once, in the saved order, with its own logits.
    EXPECT_EQ(pooled, st.pool_index) << "Q " << Q;
    EXPECT_EQ(pooled_logits, st.pool_logits) << "Q " << Q;
    EXPECT_LE(largest - smallest, 1) << "Q " << Q << ": pool not split evenly";
  }
}

TEST(Checkpoint, WeightsOnlyAndForeignCheckpointsAreRefused) {
  TempDir tmp;
  torch::manual_seed(1);
  ViT model(odd_spec());
  save_checkpoint(tmp / "weights.h5", model, some_info(odd_spec()));
  const int64_t numel = odd_spec().parameter_count();
  auto e = user_error_of([&] { validate_training_checkpoint(tmp / "weights.h5", model, numel); });
  EXPECT_NE(e.find("holds weights only"), std::string::npos) << e;
  // The weights themselves load, bit for bit.
  ViT copy(odd_spec());
  load_checkpoint_weights(tmp / "weights.h5", copy);
  for (const auto& p : model->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), copy->named_parameters()[p.key()])) << p.key();

  // A training checkpoint of another width: named as another model shape.
  FlatParams flat(*model, 1);
  std::vector<float> m(flat.padded, 0.0f), v(flat.padded, 0.0f);
  OptimizerShard os{flat.numel, flat.padded, flat.shard(0), m.data(), v.data(), 1};
  save_training_checkpoint(tmp / "train.h5", model, some_info(odd_spec()), some_state(), os);
  const ModelSpec wider = Spec::tiny().dim(12).mlp_ratio(1.5);
  ViT w(wider);
  e = user_error_of([&] { validate_training_checkpoint(tmp / "train.h5", w, wider.parameter_count()); });
  EXPECT_NE(e.find("another model shape"), std::string::npos) << e;
  EXPECT_NE(e.find(tmp / "train.h5"), std::string::npos) << e;
}

TEST(Checkpoint, PublishingLinksTheNewestAndKeepsOnlyKeepStepFiles) {
  TempDir tmp;
  const std::string dir = tmp.path();
  for (int64_t s : {4, 8, 12, 16}) std::ofstream(checkpoint_step_path(dir, s)) << "step " << s;
  std::ofstream(checkpoint_step_path(dir, 20) + ".tmp") << "half-written";  // a killed writer's
  publish_checkpoint(dir, checkpoint_step_path(dir, 16), 2);
  EXPECT_EQ(slurp(dir + "/checkpoint.h5"), "step 16");
  struct stat cur {}, step {};
  ASSERT_EQ(stat((dir + "/checkpoint.h5").c_str(), &cur), 0);
  ASSERT_EQ(stat(checkpoint_step_path(dir, 16).c_str(), &step), 0);
  EXPECT_EQ(cur.st_ino, step.st_ino) << "checkpoint.h5 is not a hard link to the step file";
  EXPECT_EQ(checkpoint_candidates(dir),
            (std::vector<std::string>{dir + "/checkpoint.h5", checkpoint_step_path(dir, 16),
                                      checkpoint_step_path(dir, 12)}));
  EXPECT_NE(stat((checkpoint_step_path(dir, 20) + ".tmp").c_str(), &step), 0) << "stale .tmp kept";
  EXPECT_EQ(checkpoint_step_path(dir, 7), dir + "/checkpoint-step00000007.h5");
}
