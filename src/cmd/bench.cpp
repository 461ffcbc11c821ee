#include "cmd/commands.hpp"

#include <mpi.h>

#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>

#include "cmd/args.hpp"
#include "comm/comm.hpp"
#include "comm/device.hpp"
#include "comm/world.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "data/fits_model.hpp"
#include "data/loader.hpp"
#include "data/transforms/transforms.hpp"
#include "io/json.hpp"
#include "model/gelu.hpp"
#include "model/softmax.hpp"
#include "model/gemm_rate.hpp"
#include "model/precision.hpp"
#include "model/vit.hpp"
#include "optim/adamw.hpp"
#include "train/setup.hpp"
#include "util/alloc.hpp"
#include "util/kokkos_session.hpp"
#include "util/strings.hpp"
#include "util/timing.hpp"
#include "util/error.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

int bench_gemm(const cli::Args& a) {
  torch::set_num_threads(static_cast<int>(a.integer("threads")));
  const double secs = a.integer("millis") / 1000.0;
  const RunDevice dev = select_device(*parse_choice<DeviceKind>(a.text("device")), Backend::Mpi);
  const torch::Device where = dev.torch_device();
  log0("device: %s\n", dev.describe().c_str());
  struct Shape { const char* what; int64_t m, k, n; };
  // Tokens per batch: 64 samples x 50 tokens (28x28, patch 4, + class token).
  std::vector<Shape> shapes = {
      {"teacher qkv   (3200x192 * 192x576)", 3200, 192, 576},
      {"teacher mlp   (3200x192 * 192x768)", 3200, 192, 768},
      {"teacher mlp2  (3200x768 * 768x192)", 3200, 768, 192},
      {"student mlp   (3200x96 * 96x384)", 3200, 96, 384},
      {"large square  (2048^3)", 2048, 2048, 2048},
  };
  if (dev.cuda()) shapes.push_back({"large square  (8192^3)", 8192, 8192, 8192});
  if (a.on("auto-only")) shapes.clear();
  JsonObject out;
  if (!shapes.empty()) log0("%-40s %14s %14s\n", "shape", "bf16 GFLOP/s", "fp32 GFLOP/s");
  for (const auto& s : shapes) {
    // bf16 products can fail outright where oneDNN is restricted below bf16
    // support (ONEDNN_MAX_CPU_ISA=AVX2): reported as 0, as the probe does.
    double bf = 0;
    try {
      bf = gemm_rate(s.m, s.k, s.n, torch::kBFloat16, secs, where);
    } catch (const std::exception&) {
    }
    const double fp = gemm_rate(s.m, s.k, s.n, torch::kFloat32, secs, where);
    char bf_text[32] = "fails";
    if (bf > 0) std::snprintf(bf_text, sizeof bf_text, "%.1f", bf / 1e9);
    log0("%-40s %14s %14.1f\n", s.what, bf_text, fp / 1e9);
    if (std::string(s.what).rfind("large", 0) == 0) {  // the last large shape wins
      const double per = dev.cuda() ? 1.0 : torch::get_num_threads();
      out.set(dev.cuda() ? "gemm_bf16_flops_per_device" : "gemm_bf16_flops_per_core", bf / per);
      out.set(dev.cuda() ? "gemm_fp32_flops_per_device" : "gemm_fp32_flops_per_core", fp / per);
    }
  }
  // What precision.compute = "auto" picks here, by the same probe as a run.
  const PrecisionChoice auto_pick = choose_precision(Precision::Auto, Precision::Fp32, where);
  log0("%s chooses %s here (%s)\n", setting_text("precision.compute", Precision::Auto).c_str(),
       choice_name(auto_pick.compute), auto_pick.why.c_str());
  out.set("auto_compute", auto_pick.compute);
  out.set("bf16_over_fp32_probe", auto_pick.bf16_over_fp32);
  if (a.given("out") && world().root()) out.write(a.text("out"));
  return kExitOk;
}

// vitkd's GELU against torch::gelu, forward and backward, at the MLP
// activation shapes of the Fashion-MNIST models, next to the fc1 product that
// feeds it (the performance log's evidence for src/model/gelu.cpp); then the
// bf16 attention softmax against autocast's (src/model/softmax.cpp).
int bench_ops(const cli::Args& a) {
  torch::set_num_threads(static_cast<int>(a.integer("threads")));
  const double secs = a.integer("millis") / 1000.0;
  struct Shape { const char* what; int64_t rows, dim, hidden; };
  const std::vector<Shape> shapes = {{"teacher [3200, 768]", 3200, 192, 768},
                                     {"student [3200, 384]", 3200, 96, 384}};
  log0("%-22s %-6s %10s %10s %10s %10s %10s\n", "activation", "dtype", "fc1 ms", "torch fwd",
       "vitkd fwd", "torch bwd", "vitkd bwd");
  for (const auto& s : shapes) {
    for (auto dtype : {torch::kBFloat16, torch::kFloat32}) {
      torch::NoGradGuard ng;
      auto x = torch::randn({s.rows, s.dim}).to(dtype), w = torch::randn({s.hidden, s.dim}).to(dtype);
      auto h = torch::linear(x, w), g = torch::randn_like(h);
      const double fc1 = ms_per_call([&] { torch::linear(x, w); }, secs);
      const double tf = ms_per_call([&] { torch::gelu(h); }, secs);
      const double vf = ms_per_call([&] { vitkd::gelu(h); }, secs);
      const double tb = ms_per_call([&] { torch::gelu_backward(g, h); }, secs);
      auto hv = h.detach().requires_grad_(true);
      const double vb = ms_per_call(
          [&] {
            torch::AutoGradMode on(true);
            auto y = vitkd::gelu(hv);
            torch::autograd::grad({y}, {hv}, {g});
          },
          secs) - vf;
      log0("%-22s %-6s %10.2f %10.2f %10.2f %10.2f %10.2f\n", s.what,
           choice_name(dtype == torch::kBFloat16 ? Precision::Bf16 : Precision::Fp32), fc1, tf, vf, tb, vb);
    }
  }
  // The attention softmax on bf16 scores at ViT-B/16's shape (batch 16, 12
  // heads, 197 tokens): LibTorch's under CPU autocast (Tensor::softmax, then
  // the cast to bf16 the next product makes) against vitkd's.
  const int64_t BH = 16 * 12, T = 197;
  auto scores = (torch::randn({BH, T, T}) * 3).to(torch::kBFloat16);
  auto grad = torch::randn({BH, T, T}).to(torch::kBFloat16);
  auto forward_backward = [&](bool autocast_path) {
    torch::AutoGradMode on(true);
    auto x = scores.detach().requires_grad_(true);
    torch::Tensor y;
    if (autocast_path) {
      AutocastBf16 ac(true);
      y = x.softmax(-1).to(torch::kBFloat16);
    } else {
      y = vitkd::softmax_lastdim(x);
    }
    torch::autograd::grad({y}, {x}, {grad});
  };
  const double af = ms_per_call([&] { AutocastBf16 ac(true); scores.softmax(-1).to(torch::kBFloat16); }, secs);
  const double vf = ms_per_call([&] { vitkd::softmax_lastdim(scores); }, secs);
  const double afb = ms_per_call([&] { forward_backward(true); }, secs);
  const double vfb = ms_per_call([&] { forward_backward(false); }, secs);
  log0("%-22s %-6s %10s %10s %10s %10s %10s\n", "softmax", "dtype", "", "autocast", "vitkd", "autocast", "vitkd");
  log0("%-22s %-6s %10s %10.2f %10.2f %10.2f %10.2f   (bwd columns: forward + backward)\n",
       "scores [192, 197, 197]", choice_name(Precision::Bf16), "", af, vf, afb, vfb);
  return kExitOk;
}

// Attention at a timm preset's shapes (--model), LibTorch's fused kernel
// against bmm-softmax-bmm (model.attention), alone and inside a block:
// forward + backward as a student trains, and (bf16) the forward alone as a
// frozen teacher runs it (inference mode, bf16 weights and biases, the scale
// folded into the queries: distill/teacher.cpp). Alternating rounds, medians
// (the performance log's evidence).
int bench_attention(const cli::Args& a) {
  torch::set_num_threads(static_cast<int>(a.integer("threads")));
  const double secs = a.integer("millis") / 1000.0;
  const auto& presets = model_presets();
  const auto preset = std::find_if(presets.begin(), presets.end(),
                                   [&](const ModelPreset& p) { return a.text("model") == p.name; });
  const int64_t B = a.integer("batch"), T = 197, D = preset->dim, H = preset->heads, rounds = a.integer("rounds");
  std::vector<AttentionKernel> kernels{AttentionKernel::Unfused};
  if (has_fused_attention()) kernels.push_back(AttentionKernel::Fused);
  log0("LibTorch %s, %d thread(s); %s: input [%lld, %lld, %lld], %lld heads; medians of %lld alternating rounds\n",
       TORCH_VERSION, torch::get_num_threads(), preset->name, (long long)B, (long long)T, (long long)D,
       (long long)H, (long long)rounds);
  if (!has_fused_attention()) log0("this LibTorch has no fused attention kernel: the unfused one only\n");
  torch::manual_seed(0);
  Block block(D, H, 4 * D);
  const auto x = torch::randn({B, T, D}).requires_grad_(true);
  const auto g = torch::randn({B, T, D});
  JsonObject out;
  log0("%-18s %-6s %14s %14s %10s\n", "module", "dtype", "unfused ms", "fused ms", "speed-up");
  for (const bool bf16 : {true, false}) {
    if (bf16) {
      try {  // as bench gemm: bf16 products fail where oneDNN is restricted below bf16
        torch::matmul(torch::ones({128, 128}, torch::kBFloat16), torch::ones({128, 128}, torch::kBFloat16));
      } catch (const std::exception&) {
        log0("bf16: LibTorch cannot multiply bf16 matrices here; skipped\n");
        continue;
      }
    }
    // Medians over alternating rounds of each kernel: unfused, then fused where there is one.
    auto time_kernels = [&](Block& blk, const std::string& what, const std::string& type,
                            const std::function<void(bool whole_block)>& call, bool whole_block) {
      std::vector<std::vector<double>> ms(2);
      for (int64_t r = 0; r < rounds; ++r)
        for (const AttentionKernel k : kernels) {
          blk->attn->kernel = k;
          ms[k == AttentionKernel::Fused].push_back(ms_per_call([&] { call(whole_block); }, secs));
        }
      double med[2] = {0, 0};
      for (int i = 0; i < 2; ++i)
        if (!ms[i].empty()) {
          std::sort(ms[i].begin(), ms[i].end());
          med[i] = ms[i][ms[i].size() / 2];
        }
      if (med[1] > 0)
        log0("%-18s %-6s %14.2f %14.2f %9.2fx\n", what.c_str(), type.c_str(), med[0], med[1], med[0] / med[1]);
      else
        log0("%-18s %-6s %14.2f %14s %10s\n", what.c_str(), type.c_str(), med[0], "-", "-");
      std::string key = what;
      std::replace(key.begin(), key.end(), ' ', '_');
      out.set(key + "_" + type + "_unfused_ms", med[0]);
      if (med[1] > 0) out.set(key + "_" + type + "_fused_ms", med[1]);
    };
    const std::string type = choice_name(bf16 ? Precision::Bf16 : Precision::Fp32);
    for (const bool whole_block : {false, true})
      time_kernels(block, whole_block ? "block" : "attention", type, [&](bool wb) {
        AutocastBf16 ac(bf16);
        auto y = wb ? block->forward(x) : block->attn->forward(x);
        y.backward(g);
      }, whole_block);
    if (!bf16) continue;
    // A frozen bf16 teacher's forward pass (distill/teacher.cpp's CheckpointTeacher).
    Block frozen(D, H, 4 * D, 1e-6);
    {
      torch::NoGradGuard ng;
      for (size_t i = 0; i < frozen->parameters().size(); ++i)
        frozen->parameters()[i].copy_(block->parameters()[i]);
    }
    freeze_for_inference(*frozen, true);
    const auto xf = x.detach();
    for (const bool whole_block : {false, true})
      time_kernels(frozen, whole_block ? "teacher block" : "teacher attention", type, [&](bool wb) {
        c10::InferenceMode inference;
        AutocastBf16 ac(true);
        wb ? frozen->forward(xf) : frozen->attn->forward(xf);
      }, whole_block);
  }
  if (a.given("out") && world().root()) out.write(a.text("out"));
  return kExitOk;
}

// The device AdamW update (Kokkos's device kernel or LibTorch's element-wise
// kernels, optim/adamw.hpp) against the Kokkos host kernel on identical
// inputs, the squared gradient norm included.
int bench_adamw(const cli::Args& a) {
  const RunDevice dev = select_device(*parse_choice<DeviceKind>(a.text("device")), Backend::Mpi);
  const torch::Device where = dev.torch_device();
  const int64_t n = a.integer("elements"), steps = a.integer("steps");
  kokkos_ensure(1);  // the host kernel
  torch::manual_seed(7);
  auto p_host = torch::randn({n});
  // Weight decay in blocks, as a model's tensors have it (weights, then biases and norms).
  auto mask = (torch::rand({(n + 999) / 1000}) > 0.3).to(torch::kFloat32).repeat_interleave(1000);
  mask = mask.narrow(0, 0, n).contiguous();
  auto p_dev = p_host.to(where);
  const auto mask_dev = mask.to(where);
  const std::string kernel = a.text("kernel");
  const AdamWKernel dk = kernel == "tensor" ? AdamWKernel::Tensor
                         : kernel == "kokkos-device" ? AdamWKernel::KokkosDevice
                         : where.is_cuda() ? AdamWKernel::Auto : AdamWKernel::Tensor;
  if (dk == AdamWKernel::KokkosDevice && !(where.is_cuda() && AdamW::kokkos_device_built()))
    throw UserError(std::string("bench adamw --kernel kokkos-device: ") +
                    (where.is_cuda() ? "this vitkd's Kokkos has no CUDA backend (build against a Kokkos with CUDA)"
                                     : "the Kokkos device kernel runs on a GPU only (--device cuda)"));
  AdamW host(Shard{0, n}, torch::kCPU, AdamWKernel::Kokkos), device(Shard{0, n}, where, dk);
  const AdamWHyper h{2e-3, 0.9, 0.95, 1e-8, 0.1};
  double host_s = 0, dev_s = 0, norm_diff = 0;
  for (int64_t k = 0; k < steps; ++k) {
    // Gradients of mixed magnitude (1e-4 .. 10), clipped every third step.
    auto g = torch::randn({n}) * torch::pow(10.0, torch::randint(-4, 2, {n}).to(torch::kFloat32));
    const auto g_dev = g.to(where);
    const float scale = k % 3 == 0 ? 0.25f : 1.0f;
    const double sq_host = host.grad_sq_norm(g), sq_dev = device.grad_sq_norm(g_dev);
    norm_diff = std::max(norm_diff, std::abs(sq_dev - sq_host) / std::max(sq_host, 1e-300));
    auto t0 = Clock::now();
    host.step(p_host, g, mask, scale, h);
    host_s += seconds_since(t0);
    synchronize(dev);
    t0 = Clock::now();
    device.step(p_dev, g_dev, mask_dev, scale, h);
    synchronize(dev);
    dev_s += seconds_since(t0);
  }
  auto rel = [](const torch::Tensor& x, const torch::Tensor& ref) {
    return ((x.to(torch::kCPU, torch::kFloat64) - ref.to(torch::kFloat64)).norm() /
            ref.to(torch::kFloat64).norm()).item<double>();
  };
  const double dp = rel(p_dev, p_host), dm = rel(device.m(), host.m()), dv = rel(device.v(), host.v());
  const double worst = std::max({dp, dm, dv, norm_diff});
  const bool pass = worst <= 1e-6;
  JsonObject out;
  out.set("device", dev.name());
  out.set("device_kernel", device.uses_kokkos_device() ? "kokkos-device" : "tensor");
  out.set("elements", n);
  out.set("steps", steps);
  out.set("rel_l2_params", dp);
  out.set("rel_l2_m", dm);
  out.set("rel_l2_v", dv);
  out.set("max_rel_diff_grad_sq_norm", norm_diff);
  out.set("max_rel_diff", worst);
  out.set("ms_per_step_host_kokkos", host_s / steps * 1e3);
  out.set("ms_per_step_device", dev_s / steps * 1e3);
  out.set("pass", pass);
  log0("%s\n", out.str().c_str());
  if (a.given("out") && world().root()) out.write(a.text("out"));
  return pass ? kExitOk : kExitRuntime;
}

int bench_comm(const cli::Args& a) {
  const int64_t n = a.integer("elements");
  const int64_t iters = a.integer("iters");
  const int P = world().size;
  const int64_t S = (n + P - 1) / P;
  std::vector<float> send(S * P, 1.0f), recv(S), gather(S * P, 0.0f);
  auto comm = make_communicator(Backend::Mpi);
  std::vector<int64_t> counts(P, S);
  const std::string head = "operation (" + std::to_string(S * P) + " floats)";
  log0("%-28s %12s %12s\n", head.c_str(), "ms", "GB/s");
  for (WireType wire : {WireType::F32, WireType::BF16}) {
    barrier();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) comm->wait(comm->start_reduce_scatter(send.data(), recv.data(), counts, wire));
    const double ms = allreduce_max(seconds_since(t0)) / iters * 1e3;
    const double gb = (P - 1.0) / P * S * P * (wire == WireType::BF16 ? 2 : 4) / (ms * 1e-3) / 1e9;
    log0("%-28s %12.2f %12.2f\n", wire == WireType::BF16 ? "reduce-scatter bf16" : "reduce-scatter fp32", ms, gb);
  }
  // Reference points for the choice between the non-blocking reduce-scatter
  // (overlappable, libnbc in OpenMPI) and the blocking collectives (tuned).
  auto timed = [&](const char* name, double bytes, auto&& op) {
    barrier();
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) op();
    const double ms = allreduce_max(seconds_since(t0)) / iters * 1e3;
    log0("%-28s %12.2f %12.2f\n", name, ms, bytes / (ms * 1e-3) / 1e9);
  };
  const double vol = (P - 1.0) / P * S * P * 4;
  timed("all-gather fp32", vol, [&] { comm->all_gather(gather.data(), S); });
  timed("blocking reduce-scatter fp32", vol, [&] {
    VK_CHECK(MPI, MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(S), MPI_FLOAT,
                                           MPI_SUM, MPI_COMM_WORLD));
  });
  timed("allreduce fp32", 2 * vol, [&] {
    VK_CHECK(MPI, MPI_Allreduce(MPI_IN_PLACE, send.data(), static_cast<int>(S * P), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD));
  });
  return kExitOk;
}

// Images per second per core of the loader's work for one training batch:
// reading the batch's samples from the file (random indices, sorted and
// coalesced as the loader reads them) and the transform (views, resampling,
// normalization), on one thread per rank; under mpirun every rank does the
// same on its own core and rank 0 sums the rates.
int bench_loader(const cli::Args& a) {
  using Clock = std::chrono::steady_clock;
  const World& w = world();
  const DatasetMeta meta = validate_dataset_collective(a.text("data"));
  kokkos_ensure(1);
  torch::set_num_threads(1);
  keep_freed_memory();  // as training does (util/alloc.hpp): a batch's buffers are not faulted in anew
  // The flags as the configuration keys they stand for, through the training
  // run's own parser, validation and builder (train/setup.hpp).
  auto num = [](double v) { return fmt("%.17g", v); };
  std::vector<std::string> keys = {"model.image_size=" + std::to_string(a.integer("image-size")), "model.patch=1",
                                   "run.seed=1", "data.mixup=" + num(a.number("mixup")),
                                   "data.cutmix=" + num(a.number("cutmix")),
                                   "data.random_erase=" + num(a.number("random-erase")),
                                   "data.policy=" + a.text("policy")};
  if (a.text("crop") != kEvaluationView) keys.insert(keys.end(), {"data.augment=true", "data.crop=" + a.text("crop")});
  AugmentSpec aug = augment_from_config(parse_config("", "bench loader", keys));
  std::optional<MixPairing> pairing;
  if (aug.mixing()) pairing.emplace(aug.seed, meta.train_size);
  check_views_fit(aug, meta);  // the one check of training (model.image_size is --image-size here)
  const int64_t batch = a.integer("batch");
  const double seconds = a.integer("millis") / 1000.0;
  // Drop the file from the page cache first where the kernel allows it
  // (clean pages of a file we may read), so the first batches read the disk.
  bool dropped = false;
  if (w.root()) {
    const int fd = ::open(meta.path.c_str(), O_RDONLY);
    if (fd >= 0) {
      dropped = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
      ::close(fd);
    }
  }
  barrier();
  const int64_t S = aug.out, C = meta.channels;
  std::vector<float> out(static_cast<size_t>(batch * C * S * S)), y(static_cast<size_t>(batch * meta.num_classes));
  double read_s = 0, transform_s = 0;
  int64_t images = 0, epoch = 0, step = 0;
  std::vector<int64_t> perm = epoch_permutation(meta.train_size, aug.seed, epoch);
  const auto t0 = Clock::now();
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  while (since(t0) < seconds || images == 0) {
    const int64_t g = batch * w.size;
    if ((step + 1) * g > meta.train_size) {
      perm = epoch_permutation(meta.train_size, aug.seed, ++epoch);
      step = 0;
    }
    const std::vector<int64_t> idx = rank_slice(perm, step++, g, w.rank, w.size);
    const auto tr = Clock::now();
    const Batch b = read_samples(meta, "train", idx, epoch, pairing ? &*pairing : nullptr);
    const auto tt = Clock::now();
    transform_batch(b.images(meta), aug, meta.mean, meta.std, nullptr, nullptr, meta.num_classes, out.data(), y.data());
    transform_s += since(tt);
    read_s += std::chrono::duration<double>(tt - tr).count();
    images += b.size();
  }
  // Per core: this rank's images over its own busy time; the job's rate: the sum.
  const double per_core = images / (read_s + transform_s);
  const double transform_rate = images / transform_s, read_rate = images / read_s;
  const double total = allreduce_sum(per_core);
  const double mean_transform = allreduce_sum(transform_rate) / w.size, mean_read = allreduce_sum(read_rate) / w.size;
  const std::string views = transform_text(aug, meta.height, meta.width);
  const bool jpeg = meta.storage == "jpeg";
  const std::string stored = jpeg ? "stored as JPEG of quality " + std::to_string(meta.jpeg_quality) : "stored raw";
  log0("bench loader: %s (%lldx%lldx%lld %s, contiguous), batch %lld per rank, %d rank(s), one thread each\n",
       meta.path.c_str(), (long long)meta.height, (long long)meta.width, (long long)C, stored.c_str(),
       (long long)batch, w.size);
  log0("views: %s\n", views.c_str());
  log0("page cache: %s\n", dropped ? "dropped for the file before the first read (posix_fadvise DONTNEED)"
                                   : "not dropped (posix_fadvise refused); reads may come from memory");
  log0("%-34s %12.0f images/s per core\n", jpeg ? "read + JPEG decode" : "read (sorted hyperslabs)", mean_read);
  log0("%-34s %12.0f images/s per core\n", "transform (views, resample, norm)", mean_transform);
  log0("%-34s %12.0f images/s per core, %.0f images/s over %d core(s)\n", "read + transform", total / w.size, total,
       w.size);
  const double model = a.number("model-rate");
  JsonObject j;
  j.set("data", meta.path).set("views", views).set("batch", batch).set("ranks", w.size).set("storage", meta.storage);
  j.set("page_cache_dropped", dropped).set("read_images_per_s_per_core", mean_read);
  j.set("transform_images_per_s_per_core", mean_transform).set("images_per_s_per_core", total / w.size);
  j.set("images_per_s", total);
  if (model > 0) {
    // Loader cores beside the compute ones: the step waits when they fall behind.
    const double wait = std::max(0.0, 1.0 - total / model);
    // The transform on the compute thread (vitkd's training loop): each step
    // also spends the batch's transform time.
    const double inline_share = (1.0 / mean_transform) / (1.0 / model + 1.0 / mean_transform);
    log0("at a model rate of %.0f images/s: loader on these %d core(s) beside the compute: the step waits %.1f %% "
         "of the time; the transform on the compute thread: %.1f %% of each step\n",
         model, w.size, 100 * wait, 100 * inline_share);
    j.set("model_images_per_s", model).set("wait_fraction", wait).set("inline_transform_fraction", inline_share);
  }
  if (w.root() && !a.text("out").empty()) j.write(a.text("out"));
  return kExitOk;
}

}  // namespace

int bench_main(const std::vector<std::string>& args) {
  const cli::Command* cmd = cli::pick_kind("bench", args);
  if (!cmd) return cli::print_help(cli::group_help("bench"));
  const cli::Args a = cli::parse(*cmd, std::vector<std::string>(args.begin() + 1, args.end()));
  if (a.help()) return cli::print_help(cli::help_text(*cmd));
  if (args[0] == "gemm") return bench_gemm(a);
  if (args[0] == "ops") return bench_ops(a);
  if (args[0] == "adamw") return bench_adamw(a);
  if (args[0] == "loader") return bench_loader(a);
  if (args[0] == "attention") return bench_attention(a);
  return bench_comm(a);
}

}  // namespace vitkd
