// The start-up lines of `vitkd train` (the configuration's edge, as
// train/setup.cpp: they read the Config as well as the resolved TrainSetup).
#include <cstdio>

#include "comm/world.hpp"
#include "config/config.hpp"
#include "train/setup.hpp"
#include "util/kokkos_session.hpp"

namespace vitkd {

// A warning about the whole run (every rank calls it): printed by rank 0.
void warn_once(const std::string& msg) {
  if (!world().root()) return;
  std::fprintf(stderr, "vitkd: warning: %s\n", msg.c_str());
  std::fflush(stderr);
}

void echo_start(const Config& cfg, const std::string& origin, const TrainSetup& s, bool kept_memory) {
  const DatasetMeta& meta = s.meta;
  log0("vitkd %s: %s on %d rank(s), %lld thread(s) per rank, compute %s (%s); host kernels: Kokkos %s\n",
       VITKD_VERSION, choice_name(cfg.run_mode), world().size, (long long)s.plan.threads,
       choice_name(s.precision.compute), s.precision.why.c_str(), kokkos_describe().c_str());
  log0("device: %s on rank 0\n", s.device.describe().c_str());
  log0("---- configuration (%s) ----\n%s----\n", origin.c_str(), s.config_text.c_str());
  log0("allocator: %s\n", kept_memory ? "freed memory stays in the process (no heap trimming)"
                                       : "left as configured (GLIBC_TUNABLES/MALLOC_* set, or not glibc)");
  log0("data: %s: %lld train, %lld val, %lld test, %lldx%lldx%lld, %lld classes; evaluations on %s\n",
       meta.path.c_str(), (long long)meta.train_size, (long long)meta.val_size, (long long)meta.test_size,
       (long long)meta.height, (long long)meta.width, (long long)meta.channels, (long long)meta.num_classes,
       choice_name(cfg.data_eval_split));
  log0("views: %s\n", transform_text(s.plan.augment, meta.height, meta.width).c_str());
}

void echo_model(const Config& cfg, const TrainSetup& s) {
  const MemoryFootprint mem = s.opt->memory();
  const Shard& shard = s.opt->shard();
  log0("%s: %s\n", s.plan.distilling() ? "student" : "model", s.spec.describe().c_str());
  if (!cfg.model_sources.empty()) log0("model keys: %s\n", cfg.model_sources.c_str());
  log0("attention: %s; stochastic depth: ",
       describe(attention_runs(s.plan.attention, s.plan.device.is_cuda(), s.plan.bf16)).c_str());
  if (s.plan.drop_path.enabled())
    log0("drop_path %g (block i of %lld drops a branch with probability %g * i / %lld)\n", cfg.model_drop_path,
         (long long)s.spec.depth, cfg.model_drop_path, (long long)std::max<int64_t>(1, s.spec.depth - 1));
  else
    log0("off\n");
  // What runs: the sharded path reduce-scatters in precision.reduce; the
  // unsharded one allreduces fp32 (validate_config refuses bf16 there).
  const std::string reduce =
      s.opt->sharded() ? std::string(choice_name(s.precision.reduce)) + " reduce-scatter" : "fp32 allreduce";
  log0("communication: %s backend, %s, %lld gradient bucket(s) of <= %.1f MB, %s, overlap %s; parameters %s, "
       "%lld B all-gathered per step\n",
       s.comm->name().c_str(), s.opt->sharded() ? "ZeRO-1 sharded AdamW" : "allreduce (unsharded)",
       (long long)s.opt->bucket_count(), cfg.dist_bucket_mb, reduce.c_str(), cfg.dist_overlap ? "on" : "off",
       s.opt->has_compute_copy() ? "read from a bf16 copy" : choice_name(Precision::Fp32),
       (long long)s.opt->all_gather_bytes());
  log0("memory per rank: parameters %lld B, gradients %lld B, optimizer state %lld B (shard %lld of %lld elements)\n",
       (long long)mem.parameters, (long long)mem.gradients, (long long)mem.optimizer,
       (long long)shard.size, (long long)s.flat->padded);
}

void echo_sifting(const Config& cfg, const TrainPlan& p) {
  if (!p.sift) return;
  log0("sifting: beta %.2f (expected kept fraction %.2f), history %lld + the global batch of %lld, "
       "from step %lld, criterion %s, scope %s\n",
       cfg.sift_beta, 1.0 / (1.0 + cfg.sift_beta), (long long)cfg.sift_history,
       (long long)p.global_batch, (long long)cfg.sift_delay,
       p.criterion == SiftCriterion::Distillation ? "kd (teacher on every sample)"
                                                  : "ce (teacher on kept samples only)",
       p.sift == SiftScope::Teacher ? "teacher (every sample trains; only kept samples get the teacher's targets)"
       : p.sift_pass == SiftPass::InForward ? "sample (only kept samples train), ranked in the training forward"
                                            : "sample (only kept samples train), ranked in a separate pass");
  // Ranked mostly against its own batch, a sample's percentile is a rank
  // within the batch, not within the recent history the rule is about.
  if (cfg.sift_history < 2 * p.global_batch)
    warn_once("sift.history = " + std::to_string(cfg.sift_history) + " is shorter than 2 global batches (2 x " +
              std::to_string(p.global_batch) + " samples): each sample is ranked mostly against its own "
              "batch; raise sift.history to at least " + std::to_string(2 * p.global_batch));
}

}  // namespace vitkd
