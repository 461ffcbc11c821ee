// The training job's own decisions, in-process at one rank: which checkpoint
// a run resumes from (train/resume.hpp: choose_resume) and what it does with
// a schedule that is shorter, equal or longer (check_resumed_schedule).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "optim/flat_params.hpp"
#include "train/report.hpp"
#include "train/resume.hpp"
#include "train/setup.hpp"
#include "util/error.hpp"

using namespace vitkd;
using vitkd::test::Spec;
using vitkd::test::TempDir;
using vitkd::test::user_error_of;

namespace {

// A training checkpoint of `model` at `step` in `dir`, published as checkpoint.h5.
void write_step(const std::string& dir, ViT& model, int64_t step) {
  FlatParams flat(*model, 1);
  std::vector<float> m(flat.padded, 0.5f), v(flat.padded, 0.25f);
  CheckpointInfo info;
  info.spec = Spec::tiny();
  info.step = step;
  info.mode = "teacher";
  TrainState st;
  st.global_batch = 8;
  st.complete = false;
  save_training_checkpoint(checkpoint_step_path(dir, step), model, info, st,
                           OptimizerShard{flat.numel, flat.padded, flat.shard(0), m.data(), v.data(), step});
  publish_checkpoint(dir, checkpoint_step_path(dir, step), 3);
}

}  // namespace

TEST(ResumeChoice, AutoTakesTheNewestUsableCheckpointAndFallsBackPastABrokenOne) {
  TempDir tmp;
  ASSERT_TRUE(tmp.ok());
  torch::manual_seed(3);
  ViT model(Spec::tiny());
  write_step(tmp.path(), model, 10);
  write_step(tmp.path(), model, 20);
  FlatParams flat(*model, 1);
  CheckpointSpec spec;
  const std::string dir = tmp.path();
  spec.resume = ResumeFrom{ResumeKind::Auto, ""};
  EXPECT_EQ(choose_resume(spec, dir, model, flat.numel), tmp / "checkpoint.h5");
  // checkpoint.h5 and its step file (one inode) cut short: the step-10 file.
  ASSERT_EQ(truncate(checkpoint_step_path(tmp.path(), 20).c_str(), 100), 0);
  EXPECT_EQ(choose_resume(spec, dir, model, flat.numel), checkpoint_step_path(tmp.path(), 10));
  spec.resume = ResumeFrom{ResumeKind::Never, ""};
  EXPECT_EQ(choose_resume(spec, dir, model, flat.numel), "");
  // An explicit path is used as it is, or is an error: no fallback.
  spec.resume = ResumeFrom{ResumeKind::Path, checkpoint_step_path(tmp.path(), 20)};
  EXPECT_NE(user_error_of([&] { choose_resume(spec, dir, model, flat.numel); }).find("checkpoint.resume: "),
            std::string::npos);
  // A model of another shape cannot resume from them at all.
  ViT other(Spec::tiny().dim(8));
  FlatParams other_flat(*other, 1);
  spec.resume = ResumeFrom{ResumeKind::Auto, ""};
  EXPECT_NE(user_error_of([&] { choose_resume(spec, dir, other, other_flat.numel); }).find("none can be resumed"),
            std::string::npos);
}

TEST(ResumedSchedule, EqualIsFinishedLongerExtendsShorterIsAnErrorNamingTheStep) {
  const std::string dir = "runs/default";
  TrainPlan plan;
  plan.total_steps = 20;
  plan.total_samples = 20 * 8;
  RunState st;
  st.step = 20;
  st.complete = true;
  EXPECT_EQ(check_resumed_schedule("c.h5", dir, plan, st), ResumedSchedule::Finished);
  plan.total_steps = 30;
  EXPECT_EQ(check_resumed_schedule("c.h5", dir, plan, st), ResumedSchedule::Extended);
  EXPECT_FALSE(st.complete) << "an extended run must not be marked complete";
  EXPECT_EQ(check_resumed_schedule("c.h5", dir, plan, st), ResumedSchedule::Continue);
  plan.total_steps = 12;
  const std::string e = user_error_of([&] { check_resumed_schedule("c.h5", dir, plan, st); });
  EXPECT_NE(e.find("c.h5 is at step 20, beyond this schedule of 12 steps"), std::string::npos) << e;
}

TEST(TimeToAccuracy, EachThresholdTakesTheFirstEvaluationAtOrAboveIt) {
  // step, epoch, samples_seen, train_seconds, elapsed_seconds, test_top1; the
  // accuracy dips after step 20, so a threshold met twice takes the first time.
  const std::vector<EvalRecord> evals = {{10, 0, 80, 1.0, 1.5, 0.80}, {20, 0, 160, 2.0, 3.0, 0.875},
                                         {30, 1, 240, 3.0, 4.5, 0.86}, {40, 1, 320, 4.0, 6.0, 0.9}};
  EXPECT_EQ(first_reaching(evals, {0.5, 0.86, 0.875, 0.9, 0.95}),
            (std::vector<int64_t>{0, 1, 1, 3, -1}));
  EXPECT_EQ(first_reaching({}, {0.5}), (std::vector<int64_t>{-1}));

  const auto tta = time_to_accuracy_json(evals, {0.87, 0.95});
  ASSERT_EQ(tta.size(), 2u);
  EXPECT_EQ(tta[0].inline_str(),
            "{\"threshold\": 0.87, \"reached\": true, \"step\": 20, \"samples_seen\": 160, "
            "\"train_seconds\": 2.0, \"elapsed_seconds\": 3.0}");
  EXPECT_EQ(tta[1].inline_str(),
            "{\"threshold\": 0.95, \"reached\": false, \"step\": null, \"samples_seen\": null, "
            "\"train_seconds\": null, \"elapsed_seconds\": null}");
  const auto ev = evaluations_json(evals);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2].inline_str(),
            "{\"step\": 30, \"samples_seen\": 240, \"train_seconds\": 3.0, \"elapsed_seconds\": 4.5, "
            "\"epoch\": 1, \"test_top1\": 0.86}");
  JsonObject r;
  r.set("a", int64_t(1)).set("evaluations", ev).set("none", std::vector<JsonObject>{});
  EXPECT_NE(r.str().find("\"none\": []"), std::string::npos) << r.str();
}
