#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "model/gemm_rate.hpp"

#include <cstdlib>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/alloc.hpp"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
TEST(Allocator, FreedActivationSizedBlocksStayInTheProcess) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) GTEST_SKIP() << "GLIBC_TUNABLES set: the user's settings win";
  ASSERT_TRUE(vitkd::keep_freed_memory());
  // 16 blocks of 4 MiB, the size of a ViT's MLP activations: with glibc's
  // defaults the first ones are mmap'ed and unmapped on free. With
  // keep_freed_memory() they come from the heap, and after they are all
  // freed the heap keeps them (no trim), ready for the next step.
  constexpr size_t kBlock = 4u << 20, kCount = 16;
  const size_t mapped_before = mallinfo2().hblkhd;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kCount; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
    ASSERT_NE(blocks.back(), nullptr);
    blocks.back()[0] = static_cast<char>(i);  // touch it
  }
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "blocks were mmap'ed";
  for (char* b : blocks) std::free(b);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, kBlock * kCount) << "the heap was trimmed";
  EXPECT_GE(after.fordblks, kBlock * kCount) << "the freed blocks left the process";
}
#endif

// ---- phase timing ------------------------------------------------------------
#include <chrono>
#include <thread>

#include "comm/cuda_runtime.hpp"
#include "util/timing.hpp"

namespace {

// A device timeline that ticks one second per mark: the time of a phase is the
// number of marks between its begin and its end.
class TickMarker final : public vitkd::PhaseMarker {
 public:
  void mark(vitkd::Phase p, bool begin) override { marks.push_back(vitkd::PhaseMark{p, begin}); }
  void settle(std::array<double, vitkd::kNumPhases>& s) override {
    ++settles;
    vitkd::add_phase_spans(marks, [](size_t i, size_t j) { return static_cast<double>(j - i); }, s);
    marks.clear();
  }
  std::vector<vitkd::PhaseMark> marks;
  int settles = 0;
};

double phase_s(const std::array<double, vitkd::kNumPhases>& a, vitkd::Phase p) { return a[static_cast<int>(p)]; }

}  // namespace

TEST(PhaseTimes, WithoutAMarkerAPhaseIsTheHostsWallClockTime) {
  vitkd::PhaseTimes t;
  {
    vitkd::ScopedPhase ph(t, vitkd::Phase::Backward);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(phase_s(t.step, vitkd::Phase::Backward), 0.019);
  EXPECT_LT(phase_s(t.step, vitkd::Phase::Backward), 1.0);
  EXPECT_EQ(phase_s(t.total, vitkd::Phase::Backward), phase_s(t.step, vitkd::Phase::Backward));
  t.settle();  // no marker: nothing to add
  EXPECT_EQ(phase_s(t.total, vitkd::Phase::Backward), phase_s(t.step, vitkd::Phase::Backward));
}

TEST(PhaseTimes, AMarkersTimesReplaceTheHostsAndArriveAtSettle) {
  TickMarker m;
  vitkd::PhaseTimes t;
  t.marker = &m;
  {
    vitkd::ScopedPhase fwd(t, vitkd::Phase::StudentForward);  // mark 0
    {
      vitkd::ScopedPhase teacher(t, vitkd::Phase::TeacherForward);  // marks 1, 2
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }  // mark 3
  { vitkd::ScopedPhase bwd(t, vitkd::Phase::Backward); }  // marks 4, 5
  ASSERT_EQ(m.marks.size(), 6u);
  EXPECT_EQ(phase_s(t.total, vitkd::Phase::TeacherForward), 0.0) << "host time was added beside the marker's";
  t.settle();
  EXPECT_EQ(m.settles, 1);
  EXPECT_EQ(phase_s(t.step, vitkd::Phase::StudentForward), 3.0);
  EXPECT_EQ(phase_s(t.step, vitkd::Phase::TeacherForward), 1.0);
  EXPECT_EQ(phase_s(t.step, vitkd::Phase::Backward), 1.0);
  t.settle();  // the marks were consumed
  EXPECT_EQ(phase_s(t.total, vitkd::Phase::StudentForward), 3.0);
  t.next_step();
  { vitkd::ScopedPhase bwd(t, vitkd::Phase::Backward); }
  t.settle();
  EXPECT_EQ(phase_s(t.step, vitkd::Phase::Backward), 1.0);
  EXPECT_EQ(phase_s(t.total, vitkd::Phase::Backward), 2.0);
}

// The CUDA-event marker itself, where a GPU is visible: on an idle device an
// event completes when it is recorded, so a 50 ms host pause between begin
// and end reads as about 50 ms.
TEST(PhaseTimes, CudaEventMarkerReadsTheTimeBetweenItsEvents) {
  if (vitkd::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or no CUDA runtime in this build)";
  vitkd::cuda_set_device(0);
  auto m = vitkd::make_cuda_event_marker(nullptr);
  vitkd::PhaseTimes t;
  t.marker = m.get();
  for (int i = 0; i < 3; ++i) {  // reuses the pooled events
    t.next_step();
    {
      vitkd::ScopedPhase ph(t, vitkd::Phase::Optimizer);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    t.settle();
    EXPECT_NEAR(phase_s(t.step, vitkd::Phase::Optimizer), 0.050, 0.015) << "step " << i;
  }
}

// settle_lagged() once per step reads the events of the step before (a step
// never waits for its own work); settle() then reads the last one.
TEST(PhaseTimes, CudaEventMarkerLaggedSettleReadsTheStepBefore) {
  if (vitkd::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or no CUDA runtime in this build)";
  vitkd::cuda_set_device(0);
  auto m = vitkd::make_cuda_event_marker(nullptr);
  vitkd::PhaseTimes t;
  t.marker = m.get();
  for (int i = 0; i < 4; ++i) {
    t.next_step();
    {
      vitkd::ScopedPhase ph(t, vitkd::Phase::Optimizer);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    t.settle_lagged();
    EXPECT_NEAR(phase_s(t.step, vitkd::Phase::Optimizer), i == 0 ? 0.0 : 0.050, 0.015) << "step " << i;
  }
  t.settle();
  EXPECT_NEAR(phase_s(t.total, vitkd::Phase::Optimizer), 0.200, 0.04);
}

// ---- a step's loss and norm read late (comm/device.hpp, LaggedReadback) -----
#include "comm/device.hpp"

namespace {
// Pushes three steps' {loss, norm} on `device` and reads them as StepEngine
// does: take(false) after each push, take(true) at the end.
std::vector<std::vector<double>> lagged_reads(const torch::Device& device, std::vector<size_t>& after_each) {
  vitkd::LaggedReadback r;
  std::vector<std::vector<double>> got;
  for (int i = 0; i < 3; ++i) {
    r.push(torch::tensor({1.0 + i, 10.0 + i}, torch::kFloat64).to(device));
    auto t = r.take(false);
    after_each.push_back(t.size());
    got.insert(got.end(), t.begin(), t.end());
  }
  auto rest = r.take(true);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(r.pending(), 0u);
  return got;
}
const std::vector<std::vector<double>> kLaggedWant{{1, 10}, {2, 11}, {3, 12}};
}  // namespace

TEST(LaggedReadback, OnTheCpuEveryStepIsReadAtOnce) {
  std::vector<size_t> after;
  EXPECT_EQ(lagged_reads(torch::kCPU, after), kLaggedWant);
  EXPECT_EQ(after, (std::vector<size_t>{1, 1, 1}));
}

TEST(LaggedReadback, OnAGpuEachStepIsReadOneStepLateInOrder) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a LibTorch without CUDA)";
  std::vector<size_t> after;
  EXPECT_EQ(lagged_reads(torch::Device(torch::kCUDA, 0), after), kLaggedWant);
  EXPECT_EQ(after, (std::vector<size_t>{0, 1, 1}));
}

// The MFU ceilings kept per machine: one line per key, a key written again
// replaces its value and keeps the others; a missing file or key reads 0.
TEST(GemmCeiling, KeptPerKeyAndReplaced) {
  using vitkd::keep_ceiling;
  using vitkd::kept_ceiling;
  const std::string dir = ::testing::TempDir() + "vitkd-ceilings-" + std::to_string(::getpid());
  const std::string file = dir + "/sub/gemm-ceilings.txt";
  EXPECT_EQ(kept_ceiling(file, "a"), 0.0);
  ASSERT_TRUE(keep_ceiling(file, "host1|libtorch-1.13|bf16|cpu|ranks-2|threads-1", 2.5e11));
  ASSERT_TRUE(keep_ceiling(file, "host2|libtorch-1.13|fp32|cpu|ranks-2|threads-1", 7e10));
  ASSERT_TRUE(keep_ceiling(file, "host1|libtorch-1.13|bf16|cpu|ranks-2|threads-1", 3e11));
  EXPECT_EQ(kept_ceiling(file, "host1|libtorch-1.13|bf16|cpu|ranks-2|threads-1"), 3e11);
  EXPECT_EQ(kept_ceiling(file, "host2|libtorch-1.13|fp32|cpu|ranks-2|threads-1"), 7e10);
  EXPECT_EQ(kept_ceiling(file, "host1|libtorch-1.13|bf16|cpu|ranks-2|threads-2"), 0.0);
  std::ifstream in(file);
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_EQ(lines, 2);
}
