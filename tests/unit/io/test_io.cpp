// result.json's writer and the timing log (timing.h5) at one rank; the
// timing log's per-rank columns at several ranks are in test_mpi_io.cpp.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>

#include "fixtures.hpp"
#include "io/h5.hpp"
#include "io/json.hpp"
#include "io/timing_log.hpp"

using namespace vitkd;
using vitkd::test::TempDir;

namespace {
std::string slurp(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}
}  // namespace

// ---- JSON ---------------------------------------------------------------------

TEST(Json, StringsAreEscapedPerRfc8259) {
  EXPECT_EQ(json_escape(""), "\"\"");
  EXPECT_EQ(json_escape("plain text"), "\"plain text\"");
  EXPECT_EQ(json_escape("q\"b\\s"), "\"q\\\"b\\\\s\"");
  EXPECT_EQ(json_escape("a\nb\tc"), "\"a\\nb\\tc\"");
  // Every other control character as \r (etc.) or \u00XX; nothing else is
  // touched (UTF-8 passes through as bytes, '/' and DEL need no escape).
  EXPECT_EQ(json_escape(std::string("\x01\r\x1f", 3)), "\"\\u0001\\r\\u001f\"");
  // Bytes that are not UTF-8 become U+FFFD instead of failing the write.
  EXPECT_EQ(json_escape("a\xff"), "\"a\xef\xbf\xbd\"");
  EXPECT_EQ(json_escape(std::string("\0x", 2)), "\"\\u0000x\"");
  EXPECT_EQ(json_escape("r\xc3\xa9sultats/\x7f"), "\"r\xc3\xa9sultats/\x7f\"");
}

TEST(Json, NumbersKeepTenSignificantDigitsAndNonFiniteBecomesNull) {
  auto one = [](auto v) { return JsonObject().set("x", v).str(); };
  auto doc = [](const std::string& value) { return "{\n  \"x\": " + value + "\n}\n"; };
  EXPECT_EQ(one(0.1), doc("0.1"));
  EXPECT_EQ(one(1.0 / 3.0), doc("0.3333333333"));
  EXPECT_EQ(one(-2.5e-7), doc("-2.5e-07"));
  EXPECT_EQ(one(1e300), doc("1e+300"));
  EXPECT_EQ(one(3.0), doc("3.0"));  // a float stays a float
  EXPECT_EQ(one(std::nan("")), doc("null"));
  EXPECT_EQ(one(std::numeric_limits<double>::infinity()), doc("null"));
  EXPECT_EQ(one(-std::numeric_limits<double>::infinity()), doc("null"));
  EXPECT_EQ(one(std::numeric_limits<int64_t>::max()), doc("9223372036854775807"));
  EXPECT_EQ(one(std::numeric_limits<int64_t>::min()), doc("-9223372036854775808"));
  EXPECT_EQ(one(-7), doc("-7"));  // int goes through the integer overload, not double
  EXPECT_EQ(one(true), doc("true"));
  EXPECT_EQ(one(false), doc("false"));
  EXPECT_EQ(one("s"), doc("\"s\""));  // a string literal is a string, not a bool
  EXPECT_EQ(one(std::vector<double>{1.5, std::nan(""), -0.25}), doc("[1.5, null, -0.25]"));
  EXPECT_EQ(one(std::vector<double>{}), doc("[]"));
  EXPECT_EQ(one(std::vector<std::string>{"a\"", "b"}), doc("[\"a\\\"\", \"b\"]"));
}

TEST(Json, KeysKeepInsertionOrderAndASecondSetReplacesInPlace) {
  JsonObject o;
  EXPECT_EQ(o.str(), "{\n}\n");
  o.set("b", int64_t(1)).set("a", "x").set("k\"ey", 2.5).set("b", false);
  EXPECT_EQ(o.str(), "{\n  \"b\": false,\n  \"a\": \"x\",\n  \"k\\\"ey\": 2.5\n}\n");
}

TEST(Json, WriteReplacesTheFileWhole) {
  TempDir tmp;
  const std::string p = tmp / "result.json";
  std::ofstream(p) << "{\"earlier\": true, \"a much longer earlier file than the new one\": 1}\n";
  JsonObject o;
  o.set("steps", int64_t(12)).set("test_top1", 0.8125);
  o.write(p);
  EXPECT_EQ(slurp(p), o.str());
  EXPECT_FALSE(exists(p + ".tmp"));
}

// ---- timing log -----------------------------------------------------------------

namespace {
TimingLogAttrs attrs() {
  TimingLogAttrs a;
  a.mode = RunMode::Distill;
  a.model = "ViT dim 16";
  a.parameters = 1099;
  a.teacher_parameters = 18404;
  a.bytes_per_rank = 4096;
  a.threads_per_rank = 2;
  a.flops_per_sample = 1.5e6;
  a.gemm_bf16_flops_per_core = 2e9;
  return a;
}
std::array<double, kNumPhases> phases_of(int64_t step, double base = 0) {
  std::array<double, kNumPhases> p{};
  for (int i = 0; i < kNumPhases; ++i) p[i] = base + static_cast<double>(step) + i / 100.0;
  return p;
}
StepMetrics metrics_of(int64_t step, double loss) {
  StepMetrics m;
  m.step = step;
  m.epoch = step / 4;
  m.samples_seen = 13 * step;
  m.samples_trained = 12 * step;
  m.teacher_forwards = 11 * step;
  m.loss = loss;
  m.lr = 1e-4 * static_cast<double>(step);
  m.kept_fraction = 0.5;
  m.images_per_second = 100.0 + static_cast<double>(step);
  return m;
}
template <class T>
std::vector<T> read(const std::string& path, const std::string& name) {
  H5Obj f = h5_open_read(path, "timing log");
  std::vector<T> v;
  h5_read(f, name, v);
  return v;
}
std::vector<int64_t> dims(const std::string& path, const std::string& name) {
  H5Obj f = h5_open_read(path, "timing log");
  return h5_dataset_info(f, name).dims;
}
}  // namespace

TEST(TimingLog, RowsAreAppendedInStepOrderAcrossFlushes) {
  TempDir tmp;
  const std::string p = tmp / "timing.h5";
  {
    TimingLog log(p, attrs(), 3);  // flushes itself after steps 3 and 6
    for (int64_t s = 1; s <= 7; ++s) {
      log.record(phases_of(s), 0.5 * static_cast<double>(s), metrics_of(s, 1.0 / static_cast<double>(s)));
      if (s == 4) log.record_eval(4, 1, 0.75);
    }
    log.record_eval(7, 1, 0.8);
    log.flush();
  }
  H5Obj f = h5_open_read(p, "timing log");
  EXPECT_EQ(h5_attr_string(f, "format"), "vitkd-timing");
  EXPECT_EQ(h5_attr_int(f, "format_version"), 1);
  EXPECT_EQ(h5_attr_int(f, "world_size"), 1);
  EXPECT_EQ(h5_attr_strings(f, "hostnames"), std::vector<std::string>{world().host});
  EXPECT_EQ(h5_attr_string(f, "mode"), "distill");
  EXPECT_EQ(h5_attr_string(f, "model"), "ViT dim 16");
  EXPECT_EQ(h5_attr_int(f, "parameters"), 1099);
  EXPECT_EQ(h5_attr_int(f, "teacher_parameters"), 18404);
  EXPECT_EQ(h5_attr_int(f, "bytes_per_rank"), 4096);
  EXPECT_EQ(h5_attr_int(f, "threads_per_rank"), 2);
  EXPECT_EQ(h5_attr_double(f, "flops_per_sample"), 1.5e6);
  EXPECT_EQ(h5_attr_double(f, "gemm_bf16_flops_per_core"), 2e9);
  {
    H5Obj d(H5Dopen2(f, "/step_seconds", H5P_DEFAULT));
    EXPECT_EQ(h5_attr_strings(d, "phases"), std::vector<std::string>(kPhaseNames.begin(), kPhaseNames.end()));
  }
  f.close();

  EXPECT_EQ(dims(p, "/step_seconds"), (std::vector<int64_t>{7, 1, kNumPhases}));
  const auto ph = read<double>(p, "/step_seconds");
  for (int64_t s = 1; s <= 7; ++s)
    for (int i = 0; i < kNumPhases; ++i) EXPECT_EQ(ph[(s - 1) * kNumPhases + i], phases_of(s)[i]) << s << "," << i;
  EXPECT_EQ(read<double>(p, "/step_wall_seconds"), (std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3, 3.5}));
  EXPECT_EQ(read<int64_t>(p, "/metrics/step"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(read<int64_t>(p, "/metrics/epoch"), (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(read<int64_t>(p, "/metrics/samples_seen"), (std::vector<int64_t>{13, 26, 39, 52, 65, 78, 91}));
  EXPECT_EQ(read<int64_t>(p, "/metrics/samples_trained")[6], 84);
  EXPECT_EQ(read<int64_t>(p, "/metrics/teacher_forwards")[6], 77);
  const auto loss = read<double>(p, "/metrics/loss");
  ASSERT_EQ(loss.size(), 7u);
  for (int64_t s = 1; s <= 7; ++s) EXPECT_EQ(loss[s - 1], 1.0 / static_cast<double>(s));
  EXPECT_EQ(read<double>(p, "/metrics/lr")[2], metrics_of(3, 0).lr);
  EXPECT_EQ(read<double>(p, "/metrics/kept_fraction")[0], 0.5);
  EXPECT_EQ(read<double>(p, "/metrics/images_per_second")[6], 107.0);
  EXPECT_EQ(read<int64_t>(p, "/eval/step"), (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(read<int64_t>(p, "/eval/epoch"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(read<double>(p, "/eval/test_top1"), (std::vector<double>{0.75, 0.8}));
  const auto user = read<double>(p, "/cpu_user_seconds"), sys = read<double>(p, "/cpu_system_seconds");
  ASSERT_EQ(user.size(), 7u);
  ASSERT_EQ(sys.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_TRUE(user[i] >= 0 && sys[i] >= 0) << i;
}

namespace {
// A log of 10 steps (loss = step, wall 1 s, evaluations after steps 5 and
// 10), then resumed from a checkpoint at step 6 for steps 7 and 8 (loss =
// 100 + step, wall 2 s, phases from 1000 on, evaluation after step 8).
void log_then_resume_at_6(const std::string& p) {
  {
    TimingLog log(p, attrs(), 4);
    for (int64_t s = 1; s <= 10; ++s) {
      log.record(phases_of(s), 1.0, metrics_of(s, static_cast<double>(s)));
      if (s % 5 == 0) log.record_eval(s, s / 5, 0.1 * static_cast<double>(s));
    }
    log.flush();
  }
  TimingLog log(p, attrs(), 100, /*resume_step=*/6);
  for (int64_t s = 7; s <= 8; ++s) log.record(phases_of(s, 1000), 2.0, metrics_of(s, 100.0 + s));
  log.record_eval(8, 2, 0.9);
  log.flush();
}
}  // namespace

TEST(TimingLog, ResumeKeepsTheRowsUpToTheCheckpointAndAppends) {
  TempDir tmp;
  const std::string p = tmp / "timing.h5";
  log_then_resume_at_6(p);
  // Steps 7..10 of the old log are dropped; the resumed run's rows follow.
  EXPECT_FALSE(exists(p + ".prev"));
  EXPECT_EQ(read<int64_t>(p, "/metrics/step"), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(dims(p, "/step_seconds")[0], 8);
  EXPECT_EQ(dims(p, "/step_wall_seconds")[0], 8);
  const auto loss = read<double>(p, "/metrics/loss");
  EXPECT_EQ(std::vector<double>(loss.begin(), loss.begin() + 6), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(read<int64_t>(p, "/eval/step"), (std::vector<int64_t>{5, 8}));
  EXPECT_EQ(read<double>(p, "/eval/test_top1"), (std::vector<double>{0.5, 0.9}));
}

// Where the resumed log is shortened (the old one ran past the checkpoint),
// the rows written after the checkpoint are the resumed run's (loss 107, 108;
// wall 2 s), not the earlier run's (7, 8; 1 s): the datasets are cut and
// flushed when the log is reopened, before any new row is written.
TEST(TimingLog, ResumedRunsRowsReplaceTheRowsAfterTheCheckpoint) {
  TempDir tmp;
  const std::string p = tmp / "timing.h5";
  log_then_resume_at_6(p);
  EXPECT_EQ(read<double>(p, "/metrics/loss"), (std::vector<double>{1, 2, 3, 4, 5, 6, 107, 108}));
  EXPECT_EQ(read<double>(p, "/step_wall_seconds"), (std::vector<double>{1, 1, 1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(read<double>(p, "/step_seconds")[6 * kNumPhases], 1007.0);
}

TEST(TimingLog, ALogThatCannotBeAppendedToIsMovedAside) {
  TempDir tmp;
  // Not HDF5 at all.
  const std::string p = tmp / "timing.h5";
  std::ofstream(p) << "not a timing log";
  {
    TimingLog log(p, attrs(), 10, /*resume_step=*/3);
    log.record(phases_of(4), 1.0, metrics_of(4, 4.0));
    log.flush();
  }
  EXPECT_EQ(slurp(p + ".prev"), "not a timing log");
  EXPECT_EQ(read<int64_t>(p, "/metrics/step"), std::vector<int64_t>{4});

  // Written at another rank count: its columns cannot take this run's ranks.
  const std::string q = tmp / "other.h5";
  {
    TimingLog log(q, attrs(), 10);
    for (int64_t s = 1; s <= 5; ++s) log.record(phases_of(s), 1.0, metrics_of(s, 1.0));
    log.flush();
  }
  {
    H5Obj f(H5Fopen(q.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    ASSERT_TRUE(f.valid());
    h5_attr_write(f, "world_size", int64_t(2));
  }
  {
    TimingLog log(q, attrs(), 10, /*resume_step=*/5);
    log.record(phases_of(6), 1.0, metrics_of(6, 6.0));
    log.flush();
  }
  EXPECT_EQ(read<int64_t>(q + ".prev", "/metrics/step"), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(read<int64_t>(q, "/metrics/step"), std::vector<int64_t>{6});
  H5Obj f = h5_open_read(q, "timing log");
  EXPECT_EQ(h5_attr_int(f, "world_size"), 1);
}
