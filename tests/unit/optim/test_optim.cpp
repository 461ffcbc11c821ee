#include <gtest/gtest.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "comm/comm.hpp"
#include "fixtures.hpp"
#include "model/vit.hpp"
#include "optim/adamw.hpp"
#include "optim/flat_params.hpp"
#include "optim/compute_copy.hpp"
#include "optim/zero.hpp"
#include "util/torch_compat.hpp"

#include <cstdio>
#include <memory>

using namespace vitkd;
using vitkd::test::Spec;

namespace {
ModelSpec tiny() { return Spec::tiny().dim(12).classes(3).dist_token(); }
}  // namespace

TEST(FlatParams, ParametersAndGradsAreViewsOfTheFlatBuffers) {
  torch::manual_seed(0);
  ViT m(tiny());
  FlatParams flat(*m, /*world_size=*/3);
  EXPECT_EQ(flat.numel, tiny().parameter_count());
  EXPECT_EQ(flat.padded % (3 * 16), 0);
  EXPECT_GE(flat.padded, flat.numel);
  const float* base = flat.params.data_ptr<float>();
  const float* gbase = flat.grads.data_ptr<float>();
  auto x = torch::randn({2, 1, 8, 8});
  m->forward(x).prediction().sum().backward();
  for (size_t i = 0; i < flat.slots.size(); ++i) {
    auto p = m->named_parameters()[flat.slots[i].name];
    EXPECT_EQ(p.data_ptr<float>(), base + flat.slots[i].offset) << flat.slots[i].name;
    ASSERT_TRUE(p.grad().defined());
    // Autograd accumulated into the view, not into a fresh tensor.
    EXPECT_EQ(p.grad().data_ptr<float>(), gbase + flat.slots[i].offset) << flat.slots[i].name;
  }
  EXPECT_GT(flat.grads.abs().sum().item<double>(), 0.0);
  // Padding holds nothing.
  EXPECT_EQ(flat.grads.narrow(0, flat.numel, flat.padded - flat.numel).abs().sum().item<double>(), 0.0);
  // Shards tile the buffer.
  EXPECT_EQ(flat.shard(2).offset + flat.shard(2).size, flat.padded);
}

TEST(FlatParams, WeightDecayOnlyOnMatrices) {
  EXPECT_TRUE(decays("blocks.0.attn.qkv.weight", 2));
  EXPECT_TRUE(decays("patch_embed.proj.weight", 2));
  EXPECT_FALSE(decays("blocks.0.attn.qkv.bias", 1));
  EXPECT_FALSE(decays("blocks.0.norm1.weight", 1));
  EXPECT_FALSE(decays("cls_token", 3));
  EXPECT_FALSE(decays("dist_token", 3));
  EXPECT_FALSE(decays("pos_embed", 3));
  torch::manual_seed(0);
  ViT m(tiny());
  FlatParams flat(*m, 2);
  double expect = 0;
  for (auto& s : flat.slots) expect += s.decay ? s.numel : 0;
  EXPECT_DOUBLE_EQ(flat.decay_mask.sum().item<double>(), expect);
}

TEST(AdamW, StepsMatchTorchAdamW) {
  torch::manual_seed(1);
  const int64_t n = 1000;
  auto p_ref = torch::randn({n}).set_requires_grad(true);
  auto p = p_ref.detach().clone();
  auto mask = torch::ones({n});
  torch::optim::AdamW ref({p_ref}, torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  AdamW ours(Shard{0, n});
  AdamWHyper h{3e-3, 0.9, 0.95, 1e-8, 0.1};
  for (int step = 0; step < 20; ++step) {
    auto g = torch::randn({n});
    p_ref.mutable_grad() = g.clone();
    ref.step();
    ours.step(p, g, mask, 1.0f, h);
  }
  EXPECT_LT((p - p_ref.detach()).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(ours.steps(), 20);
}

// The tensor-kernel AdamW (the one that runs on a device) against the Kokkos
// host kernel: 20 steps with clipping scales, a partial decay mask and
// gradients of mixed magnitude; parameters and moments within 1e-6 relative.
TEST(AdamW, TensorKernelEqualsTheKokkosKernel) {
  torch::manual_seed(3);
  const int64_t n = 4099;
  auto p_host = torch::randn({n});
  auto p_dev = p_host.clone();
  auto mask = (torch::rand({n}) > 0.3).to(torch::kFloat32);
  AdamW host(Shard{0, n}, torch::kCPU, AdamWKernel::Kokkos), dev(Shard{0, n}, torch::kCPU, AdamWKernel::Tensor);
  ASSERT_TRUE(host.uses_kokkos());
  ASSERT_FALSE(dev.uses_kokkos());
  const AdamWHyper h{2e-3, 0.9, 0.95, 1e-8, 0.1};
  for (int step = 0; step < 20; ++step) {
    auto g = torch::randn({n}) * torch::pow(10.0, torch::randint(-4, 2, {n}).to(torch::kFloat32));
    EXPECT_NEAR(dev.grad_sq_norm(g), host.grad_sq_norm(g), 1e-9 * host.grad_sq_norm(g));
    const float scale = step % 3 == 0 ? 0.25f : 1.0f;
    host.step(p_host, g, mask, scale, h);
    dev.step(p_dev, g, mask, scale, h);
  }
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a - b).norm() / b.norm()).item<double>();
  };
  EXPECT_LE(rel(p_dev, p_host), 1e-6);
  EXPECT_LE(rel(dev.m(), host.m()), 1e-6);
  EXPECT_LE(rel(dev.v(), host.v()), 1e-6);
  EXPECT_EQ(dev.steps(), 20);
}

TEST(AdamW, ClipGateIsTheClipFormulaAndSkipsNonFiniteNorms) {
  auto gate = [](double norm, double clip) {
    return clip_gate(torch::scalar_tensor(norm, torch::kFloat64), clip);
  };
  EXPECT_EQ(gate(3.0, 1.0).scale.item<float>(), static_cast<float>(1.0 / (3.0 + 1e-6)));
  EXPECT_EQ(gate(3.0, 1.0).scale.scalar_type(), torch::kFloat32);
  EXPECT_EQ(gate(0.5, 1.0).scale.item<float>(), 1.0f);
  EXPECT_EQ(gate(30.0, 0.0).scale.item<float>(), 1.0f);  // clip <= 0: no clipping
  EXPECT_TRUE(gate(30.0, 1.0).apply.item<bool>());
  EXPECT_FALSE(gate(NAN, 1.0).apply.item<bool>());
  EXPECT_FALSE(gate(INFINITY, 0.0).apply.item<bool>());
}

// The device implementation decides clipping and skipping from tensors on
// its device (no host read): a non-finite step leaves parameters, moments
// and the step count exactly as they were, and the run goes on as the host
// kernel's, which never saw that step.
TEST(AdamW, GatedDeviceStepSkipsANonFiniteStepAsTheHostKernelDoes) {
  torch::manual_seed(5);
  const int64_t n = 1031;
  auto p_host = torch::randn({n});
  auto p_dev = p_host.clone();
  auto mask = (torch::rand({n}) > 0.3).to(torch::kFloat32);
  AdamW host(Shard{0, n}, torch::kCPU, AdamWKernel::Kokkos), dev(Shard{0, n}, torch::kCPU, AdamWKernel::Tensor);
  const AdamWHyper h{2e-3, 0.9, 0.95, 1e-8, 0.1};
  for (int step = 0; step < 12; ++step) {
    auto g = torch::randn({n}) * (step % 4 == 1 ? 10.0f : 0.1f);  // some steps clipped
    if (step == 5) g[7] = NAN;
    if (step == 8) g[3] = INFINITY;
    const StepGate gate = clip_gate(dev.grad_sq_norm_tensor(g).sqrt(), 1.0);
    const auto before_p = p_dev.clone(), before_m = dev.m().clone(), before_v = dev.v().clone();
    dev.step(p_dev, g.clone(), mask, gate, h);  // (LibTorch's fused kernel leaves the scaled gradient in it)
    host.step(p_host, g, mask, gate, h);
    if (step == 5 || step == 8) {
      EXPECT_FALSE(gate.apply.item<bool>());
      EXPECT_TRUE(torch::equal(p_dev, before_p)) << "step " << step;
      EXPECT_TRUE(torch::equal(dev.m(), before_m)) << "step " << step;
      EXPECT_TRUE(torch::equal(dev.v(), before_v)) << "step " << step;
    } else {
      EXPECT_FALSE(torch::equal(p_dev, before_p)) << "step " << step;
    }
  }
  EXPECT_EQ(dev.steps(), 10);
  EXPECT_EQ(host.steps(), 10);
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a - b).norm() / b.norm()).item<double>();
  };
  EXPECT_LE(rel(p_dev, p_host), 1e-6);
  EXPECT_LE(rel(dev.m(), host.m()), 1e-6);
  EXPECT_LE(rel(dev.v(), host.v()), 1e-6);
  // The step count survives a checkpoint round trip on both implementations.
  dev.set_steps(42);
  EXPECT_EQ(dev.steps(), 42);
}

TEST(AdamW, GradNormIsTheSumOfSquaresAndTheMaskLimitsDecay) {
  const int64_t n = 257;
  auto g = torch::randn({n});
  AdamW opt(Shard{0, n});
  EXPECT_NEAR(opt.grad_sq_norm(g), g.pow(2).sum().item<double>(), 1e-3);
  // Zero gradient, zero mask: nothing moves. Mask 1: decay shrinks p by lr*wd.
  auto p = torch::ones({n});
  auto zero = torch::zeros({n});
  auto mask = torch::zeros({n});
  mask.narrow(0, 0, 10).fill_(1.0f);
  opt.step(p, zero, mask, 1.0f, AdamWHyper{0.1, 0.9, 0.999, 1e-8, 0.5});
  EXPECT_NEAR(p[0].item<double>(), 1.0 - 0.1 * 0.5, 1e-6);
  EXPECT_NEAR(p[20].item<double>(), 1.0, 1e-7);
}

// The tensor kernel (a GPU without Kokkos CUDA) sums the squares in float64
// slice by slice, never through a float64 copy of the whole shard: over
// several slices (3.5 Mi elements) it is the float64 sum, and it equals the
// Kokkos host kernel's.
TEST(AdamW, TensorKernelNormIsTheFloat64SumOverSlices) {
  const int64_t n = (int64_t(7) << 20) / 2 + 3;
  torch::manual_seed(3);
  const auto g = torch::randn({n}) * 1e3;
  AdamW tensor(Shard{0, n}, torch::kCPU, AdamWKernel::Tensor), host(Shard{0, n});
  const double want = g.to(torch::kFloat64).square().sum().item<double>();
  EXPECT_NEAR(tensor.grad_sq_norm_tensor(g).item<double>(), want, 1e-10 * want);
  EXPECT_NEAR(host.grad_sq_norm(g), want, 1e-10 * want);
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
// state_bytes() is what the optimizer memory is reported from (result.json,
// the start-up line): it must be what AdamW really allocates, measured at
// the allocator, not a formula over the shard size.
TEST(AdamW, StateBytesAreTheBytesItAllocates) {
  auto in_use = [] {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);  // heap in use + mmap'ed blocks
  };
  // The first allocations set up Kokkos's records and LibTorch's (its
  // parallel fill of a large tensor starts the thread pool).
  { AdamW warm(Shard{0, 16}); }
  { AdamW warm(Shard{0, int64_t(1) << 20}); }
  const int64_t slack = 64 << 10;
  for (int64_t n : {int64_t(1) << 20, int64_t(3) << 19}) {
    const int64_t before = in_use();
    int64_t held = 0, reported = 0;
    {
      AdamW opt(Shard{7, n});
      held = in_use() - before;
      reported = opt.state_bytes();
      // Both moments span the whole shard, zero-initialised.
      EXPECT_EQ(opt.m()[n - 1].item<float>(), 0.0f);
      EXPECT_EQ(opt.v()[n - 1].item<float>(), 0.0f);
      EXPECT_NE(opt.m().data_ptr(), opt.v().data_ptr());
    }
    EXPECT_GE(held, reported) << "n " << n;
    EXPECT_LE(held, reported + slack) << "n " << n << ": allocated " << held << ", reported " << reported;
    EXPECT_GE(reported, 2 * n * int64_t(sizeof(float)));
    EXPECT_LE(in_use() - before, slack) << "the moments were not freed";
  }
}
#endif

TEST(Schedule, WarmupThenCosineToFloor) {
  EXPECT_DOUBLE_EQ(schedule_lr(0, 100, 1000, 1.0, 0.1), 0.0);
  EXPECT_DOUBLE_EQ(schedule_lr(50, 100, 1000, 1.0, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(schedule_lr(100, 100, 1000, 1.0, 0.1), 1.0);
  EXPECT_NEAR(schedule_lr(550, 100, 1000, 1.0, 0.1), 0.55, 1e-12);  // half-way: (peak+floor)/2
  EXPECT_NEAR(schedule_lr(1000, 100, 1000, 1.0, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(schedule_lr(5000, 100, 1000, 1.0, 0.1), 0.1, 1e-12);  // stays at the floor
}

namespace {
struct OneRankRun {
  torch::Tensor params, m, v;
  std::vector<double> norms;
  int64_t bytes_sent = 0;
};
// 8 steps of the odd model at one rank through the communicator `backend`.
OneRankRun one_rank_run(Backend backend, const BucketOptions& bopt) {
  torch::manual_seed(5);
  ViT model(vitkd::test::odd_spec());
  FlatParams flat(*model, 1);
  auto comm = make_communicator(backend);
  ShardedAdamW opt(flat, *model, *comm, 0, bopt);
  const AdamWHyper h{1e-3, 0.9, 0.999, 1e-8, 0.05};
  OneRankRun out;
  for (int step = 0; step < 8; ++step) {
    const auto [x, y] = vitkd::test::odd_batch(step);
    flat.zero_grad();
    opt.begin_backward();
    torch::nn::functional::cross_entropy(model->forward(x).logits, y).backward();
    out.norms.push_back(opt.step(h, 0.5));  // clipping on: the norm feeds the update
  }
  out.params = flat.params.clone();
  out.m = opt.adamw().m().clone();
  out.v = opt.adamw().v().clone();
  out.bytes_sent = comm->bytes_sent();
  return out;
}
}  // namespace

// World size 1 reduces nothing: the "local" backend (what dist.backend
// "auto" and "mpi" resolve to at one rank) calls no MPI collective and
// hands nothing to a library, and trains bit for bit as the MPI backend
// does at one rank: sharded in fp32 and on a bf16 wire (the values rounded
// through bfloat16, as a one-rank bf16 reduction does), several buckets or
// one, and unsharded.
TEST(LocalBackend, OneRankTrainsBitForBitAsMpiAtOneRank) {
  ASSERT_EQ(world().size, 1) << "a unit test: one rank";
  for (bool sharded : {true, false})
    for (WireType wire : {WireType::F32, WireType::BF16})
      for (int64_t bucket : {int64_t(25) << 20, int64_t(512)}) {
        if (!sharded && (wire == WireType::BF16 || bucket != (int64_t(25) << 20))) continue;
        BucketOptions b;
        b.sharded = sharded;
        b.wire = wire;
        b.bucket_bytes = bucket;
        const OneRankRun mpi = one_rank_run(Backend::Mpi, b), local = one_rank_run(Backend::Local, b);
        const std::string what = std::string(sharded ? "sharded" : "unsharded") +
                                 (wire == WireType::BF16 ? ", bf16 wire" : ", fp32 wire") + ", bucket " +
                                 std::to_string(bucket);
        EXPECT_TRUE(torch::equal(local.params, mpi.params)) << what;
        EXPECT_TRUE(torch::equal(local.m, mpi.m)) << what;
        EXPECT_TRUE(torch::equal(local.v, mpi.v)) << what;
        EXPECT_EQ(local.norms, mpi.norms) << what;
        EXPECT_EQ(local.bytes_sent, 0) << what;
        if (sharded) {
          EXPECT_GT(mpi.bytes_sent, 0) << what;
        }
      }
}

// The compute copy (optim/compute_copy.hpp) at ViT-S/16's shapes: every
// matrix-product operand has a bf16 copy (the fp32 value rounded once), and
// the bytes gathered per step are half of the fp32 all-gather's within 2 % (0.506: the fp32 norms, tokens,
// position embedding and the blocks' biases beside the bf16 copy),
// at 2 to 64 ranks.
TEST(ComputeCopy, CoversTheOperandsAtHalfTheGatherBytesOfViTS16) {
  const ModelSpec s16 = Spec().image(224).channels(3).patch(16).dim(384).depth(12).heads(6).mlp_ratio(4.0).classes(1000);
  for (int world : {2, 8, 64}) {
    torch::manual_seed(3);
    ViT model(s16);
    FlatParams flat(*model, world);
    const auto operands = model->matrix_operands();
    ComputeCopy copy(flat, operands);
    EXPECT_EQ(copy.weights().size(), operands.size());
    for (const auto& p : operands) {
      const torch::Tensor c = copy.weights()(p);
      ASSERT_EQ(c.scalar_type(), torch::kBFloat16);
      ASSERT_TRUE(torch::equal(c, p.to(torch::kBFloat16)));
    }
    EXPECT_TRUE(torch::equal(copy.weights()(model->norm->weight), model->norm->weight)) << "a norm has no copy";
    const double fp32 = double(flat.shard(0).size) * 4, ratio = double(copy.gather_bytes()) / fp32;
    EXPECT_GE(ratio, 0.5);
    EXPECT_LT(ratio, 0.51) << "at " << world << " ranks";
    std::printf("[ compute copy ] ViT-S/16 at %d ranks: %.4f of the fp32 all-gather's bytes\n", world, ratio);
  }
}

// The forward pass reading the copies under bf16 autocast gives bitwise the
// logits and fp32 gradients of autocast casting the fp32 parameters itself,
// over two backward passes accumulating into the flat buffer.
TEST(ComputeCopy, ForwardAndGradientsAreBitwiseAutocasts) {
  VITKD_SKIP_WITHOUT_BF16_MATMUL();
  auto run = [](bool copies) {
    torch::manual_seed(7);
    ViT model(tiny());
    FlatParams flat(*model, 1);
    std::unique_ptr<ComputeCopy> copy;
    if (copies) {
      copy = std::make_unique<ComputeCopy>(flat, model->matrix_operands());
      model->use_compute_weights(&copy->weights());
    }
    torch::manual_seed(8);
    torch::Tensor logits;
    for (int micro = 0; micro < 2; ++micro) {  // the second accumulates onto the first's gradients
      const torch::Tensor x = torch::randn({5, 1, 8, 8});
      {
        AutocastBf16 ac(true);
        const ViTOutput out = model->forward(x);
        logits = (out.logits.to(torch::kFloat32) + out.dist_logits.to(torch::kFloat32));
      }
      logits.pow(2).sum().backward();
    }
    return std::make_pair(logits.detach(), flat.grads.clone());
  };
  const auto [la, ga] = run(false);
  const auto [lc, gc] = run(true);
  EXPECT_TRUE(torch::equal(la, lc));
  EXPECT_TRUE(torch::equal(ga, gc)) << "max gradient difference " << (ga - gc).abs().max().item<double>();
  EXPECT_GT(ga.abs().sum().item<double>(), 0.0);
}
