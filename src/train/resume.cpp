#include "train/resume.hpp"

#include <cstdio>
#include <optional>

#include "comm/world.hpp"
#include "data/tensors.hpp"
#include "train/inputs.hpp"
#include "train/setup.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

// The AdamW moments in host memory for the checkpoint code: the state itself
// on the CPU, copies on a device (the file format is the same for both).
struct HostMoments {
  torch::Tensor m, v;
  explicit HostMoments(const AdamW& a)
      : m(a.m().to(torch::kCPU).contiguous()), v(a.v().to(torch::kCPU).contiguous()) {}
  /// Copies loaded values back to the device (no-op when they are the state).
  void store(AdamW& a) const {
    if (!a.m().device().is_cpu()) {
      a.m().copy_(m);
      a.v().copy_(v);
    }
  }
};

}  // namespace

std::string choose_resume(const CheckpointSpec& spec, const std::string& out_dir, ViT& model, int64_t numel) {
  std::string chosen, error;
  const ResumeKind kind = spec.resume.kind;
  if (world().root() && kind != ResumeKind::Never) {
    if (kind == ResumeKind::Auto) {
      const auto cands = checkpoint_candidates(out_dir);
      std::string first_problem;
      for (size_t i = 0; i < cands.size() && chosen.empty(); ++i) {
        try {
          validate_training_checkpoint(cands[i], model, numel);
          chosen = cands[i];
        } catch (const UserError& e) {
          if (first_problem.empty()) first_problem = e.what();
          log0("resume: %s is unusable: %s\n", cands[i].c_str(), e.what());
        }
      }
      if (!chosen.empty() && chosen != cands.front())
        log0("resume: falling back to the previous good checkpoint %s\n", chosen.c_str());
      if (chosen.empty() && !cands.empty())
        error = setting_text("checkpoint.resume", ResumeKind::Auto) + ": " + out_dir +
                " holds checkpoints but none can be resumed (newest: " + first_problem +
                "); choose another run.out_dir, or set " + setting_text("checkpoint.resume", ResumeKind::Never) +
                " to start over";
    } else {
      try {
        validate_training_checkpoint(spec.resume.path, model, numel);
        chosen = spec.resume.path;
      } catch (const UserError& e) {
        error = std::string("checkpoint.resume: ") + e.what();
      }
    }
  }
  error = broadcast_string(error);
  if (!error.empty()) throw UserError(error);
  return broadcast_string(chosen);
}

void keep_resumed_precision(const CheckpointSpec& spec, const std::string& out_dir, PrecisionChoice& p) {
  std::string path, recorded;
  const ResumeKind kind = spec.resume.kind;
  if (world().root() && kind != ResumeKind::Never) {
    if (kind == ResumeKind::Auto) {
      const auto cands = checkpoint_candidates(out_dir);
      if (!cands.empty()) path = cands.front();
    } else {
      path = spec.resume.path;
    }
    try {
      if (!path.empty()) recorded = read_checkpoint_info(path).compute;
    } catch (const std::exception&) {
      // choose_resume validates the file and reports what is wrong with it.
    }
  }
  path = broadcast_string(path);
  recorded = broadcast_string(recorded);
  const std::optional<Precision> was = parse_choice<Precision>(recorded);
  if (!was || *was == Precision::Auto || *was == p.compute) return;
  if (p.requested != Precision::Auto) {
    log0("precision: computing in %s as configured (precision.compute); %s was computed in %s\n",
         choice_name(p.compute), path.c_str(), recorded.c_str());
    return;
  }
  const bool bf16_fails = p.probe_seconds > 0 && p.bf16_over_fp32 <= 0;
  if (*was == Precision::Bf16 && bf16_fails) return;  // the start-up line says why fp32
  p.why = "auto: kept from " + path + ", which was computed in " + recorded + " (here auto alone would choose " +
          choice_name(p.compute) + "; set precision.compute to change it); " + p.why.substr(p.why.find(':') + 2);
  const bool reduce_follows = p.reduce == p.compute && p.reduce_requested == Precision::Auto;
  p.compute = *was;
  if (reduce_follows) p.reduce = *was;
}

CheckpointInfo apply_resume(const std::string& path, TrainSetup& s, RunState& st, GlobalSelector& selector,
                            SamplePool& pool) {
  const World& w = world();
  const TrainPlan& plan = s.plan;
  const CheckpointInfo info = read_checkpoint_info(path);
  AdamW& adam = s.opt->adamw();
  HostMoments hm(adam);
  OptimizerShard os{s.flat->numel, s.flat->padded, s.opt->shard(), hm.m.data_ptr<float>(),
                    hm.v.data_ptr<float>(), adam.steps()};
  static_cast<TrainState&>(st) = load_training_checkpoint(path, s.student, os, w.rank, w.size);
  s.opt->parameters_changed();  // the bf16 copy of the loaded weights
  hm.store(adam);
  if (st.global_batch != plan.global_batch) {
    const bool fits = st.global_batch % w.size == 0;
    throw UserError(path + " was written with a global batch of " + std::to_string(st.global_batch) +
                    " samples, this run has " + std::to_string(plan.global_batch) + " (data.batch_size " +
                    std::to_string(plan.batch) + " x " + std::to_string(w.size) + " ranks); " +
                    (fits ? "set data.batch_size = " + std::to_string(st.global_batch / w.size)
                          : std::string("use a rank count that divides ") + std::to_string(st.global_batch)) +
                    " to resume, or " + setting_text("checkpoint.resume", ResumeKind::Never) + " to start over");
  }
  if (st.seed != static_cast<uint64_t>(s.run.seed))
    throw UserError(path + " was written with run.seed = " + std::to_string(st.seed) +
                    "; resume with the same seed (the data order depends on it), or set " +
                    setting_text("checkpoint.resume", ResumeKind::Never) + " to start over");
  // The evaluations so far read the checkpoint's data.eval_split: a curve stays on one split.
  // (A checkpoint from before data.eval_split existed evaluated on test, the key's default.)
  const EvalSplit split_before =
      info.config.find("eval_split = \"" + std::string(choice_name(EvalSplit::Val)) + "\"") != std::string::npos
          ? EvalSplit::Val
          : EvalSplit::Test;
  if (split_before != plan.eval_split)
    throw UserError(path + " was written with " + setting_text("data.eval_split", split_before) +
                    "; resume with the same split (the evaluations so far read it), or set " +
                    setting_text("checkpoint.resume", ResumeKind::Never) + " to start over");
  adam.set_steps(os.adam_steps);
  st.step = info.step;
  st.epochs_done = info.epoch;
  st.test_top1 = info.test_top1;
  if (!w.root()) st.teacher_forwards = 0;  // the checkpoint holds the sum over ranks
  selector.sifter().restore_history(st.sift_history);
  if (!st.pool_index.empty()) {
    std::optional<MixPairing> pairing;
    if (plan.augment.mixing()) pairing.emplace(plan.augment.seed, s.meta.train_size);
    Batch b = read_samples(s.meta, "train", st.pool_index, st.data_epoch, pairing ? &*pairing : nullptr);
    torch::Tensor t;
    const bool kd = plan.pools_logits();
    if (kd && st.logit_dim == s.spec.classes)
      t = torch::from_blob(const_cast<float*>(st.pool_logits.data()), {b.size(), st.logit_dim},
                           torch::kFloat32)
              .clone();
    const TrainInputs in = device_inputs(s, b);
    const torch::Tensor& x = in.x;
    if (t.defined()) t = t.to(plan.device);
    if (kd && !t.defined())
      t = s.views ? s.views->targets(b.epoch, torch::tensor(st.pool_index, torch::kLong)).to(plan.device)
                  : s.teacher->logits(x);
    pool.add(x, in.y, t, torch::tensor(st.pool_index, torch::kLong));
  }
  log0("resume: from %s (written at %lld rank(s)): step %lld, epoch %lld, batch %lld of the epoch, "
       "%lld samples seen%s\n", path.c_str(), (long long)info.world_size, (long long)st.step,
       (long long)st.data_epoch + 1, (long long)st.data_batch, (long long)st.samples_seen,
       info.world_size != w.size ? "; optimizer state resharded to this rank count" : "");
  return info;
}

ResumedSchedule check_resumed_schedule(const std::string& path, const std::string& out_dir,
                                       const TrainPlan& plan, RunState& st) {
  if (st.step > plan.total_steps)
    throw UserError(path + " is at step " + std::to_string(st.step) + ", beyond this schedule of " +
                    std::to_string(plan.total_steps) + " steps (train.epochs = " +
                    std::to_string(plan.epochs) + ", train.max_steps = " +
                    std::to_string(plan.max_steps) + "); raise train.epochs or train.max_steps "
                    "to continue it, or set " + setting_text("checkpoint.resume", ResumeKind::Never) +
                    " to start over");
  if (!st.complete) return ResumedSchedule::Continue;
  if (st.step == plan.total_steps) {
    log0("resume: the run in %s already finished its schedule; nothing to do (raise train.epochs "
         "or train.max_steps to extend it, or set %s to train again from scratch)\n", out_dir.c_str(),
         setting_text("checkpoint.resume", ResumeKind::Never).c_str());
    return ResumedSchedule::Finished;
  }
  log0("resume: extending the finished run from step %lld to %lld (%.0f of %.0f samples seen): the "
       "learning rate follows the cosine schedule of the new length from there\n",
       (long long)st.step, (long long)plan.total_steps, double(st.samples_seen), plan.total_samples);
  st.complete = false;
  return ResumedSchedule::Extended;
}

std::string write_run_checkpoint(CheckpointKind kind, TrainSetup& s,
                                 const RunState& st, GlobalSelector& selector,
                                 const SamplePool& pool, double run_seconds, PhaseTimes& times) {
  ScopedPhase ph(times, Phase::Checkpoint);
  const World& w = world();
  std::string path;
  if (kind == CheckpointKind::Diagnostic) {
    char name[64];
    std::snprintf(name, sizeof name, "/diagnostic-step%08lld.h5", (long long)st.step);
    path = s.run.out_dir + name;
  } else {
    path = checkpoint_step_path(s.run.out_dir, st.step);
  }
  CheckpointInfo info;
  info.spec = s.spec;
  info.step = st.step;
  info.epoch = st.epochs_done;
  info.world_size = w.size;
  info.mode = choice_name(s.plan.mode);
  info.config = s.config_text;
  info.test_top1 = st.test_top1;
  info.compute = choice_name(s.precision.compute);
  TrainState out = st;  // the checkpointed part, then what lives elsewhere
  out.teacher_forwards = allreduce_sum(st.teacher_forwards);
  out.train_seconds = st.train_seconds + run_seconds;
  // Rank 0's, as its train_seconds: each evaluation's training time is rank
  // 0's elapsed time less rank 0's time evaluating (trainer.cpp), and a
  // resumed run goes on from these two. (The slowest rank's time evaluating
  // was stored up to 0.4.4: under load a rank that waited longer in the
  // evaluation made the resumed run's training times start a few
  // milliseconds below the ones before the preemption.)
  double eval_here = times.total[static_cast<int>(Phase::Eval)];
  broadcast_bytes(&eval_here, sizeof eval_here, 0);
  out.eval_seconds = st.eval_seconds + eval_here;
  out.complete = kind == CheckpointKind::Final;
  out.sift_history = selector.sifter().history().ordered();
  out.pool_index = pool.indices();
  out.logit_dim = s.plan.pools_logits() ? s.spec.classes : 0;
  out.pool_logits.clear();
  if (out.logit_dim > 0) {
    out.pool_logits = pool.logits();
    out.pool_logits.resize(out.pool_index.size() * out.logit_dim, 0.0f);
  }
  s.opt->gather_fp32();  // every rank's fp32 weights whole (a compute copy leaves them stale)
  AdamW& adam = s.opt->adamw();
  HostMoments hm(adam);
  save_training_checkpoint(path, s.student, info, out,
                           OptimizerShard{s.flat->numel, s.flat->padded, s.opt->shard(),
                                          hm.m.data_ptr<float>(), hm.v.data_ptr<float>(), adam.steps()});
  if (kind != CheckpointKind::Diagnostic && w.root())
    publish_checkpoint(s.run.out_dir, path, s.checkpoint.keep);
  barrier();
  return path;
}

}  // namespace vitkd
