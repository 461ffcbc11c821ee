#include "io/timing_log.hpp"

#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "comm/world.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

void cpu_times(double* user, double* sys) {
  rusage ru{};
  VK_CHECK(FILE, getrusage(RUSAGE_SELF, &ru) == 0);
  *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

// An extendible, chunked dataset of `dims` with the first axis 0 to start.
void create_extendible(hid_t file, const std::string& path, hid_t type, std::vector<hsize_t> tail) {
  std::vector<hsize_t> dims{0}, maxd{H5S_UNLIMITED}, chunk{64};
  for (auto t : tail) {
    dims.push_back(t);
    maxd.push_back(t);
    chunk.push_back(t);
  }
  H5Obj space(VK_CHECK(H5, H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxd.data())));
  H5Obj dcpl(VK_CHECK(H5, H5Pcreate(H5P_DATASET_CREATE)));
  VK_CHECK(H5, H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()));
  H5Obj lcpl(VK_CHECK(H5, H5Pcreate(H5P_LINK_CREATE)));
  VK_CHECK(H5, H5Pset_create_intermediate_group(lcpl, 1));
  H5Obj d(VK_CHECK(H5, H5Dcreate2(file, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT)));
}

// Collective: grows the first axis of `path` to `rows`; then, if `data` is
// given, writes the block [from, from+count) x [col, col+width) of the
// second axis (the rest of the shape whole).
void append(hid_t file, const std::string& path, hid_t type, hsize_t rows, hsize_t from,
            hsize_t count, const void* data, hsize_t col = 0, hsize_t width = 0) {
  H5Obj d(VK_CHECK(H5, H5Dopen2(file, path.c_str(), H5P_DEFAULT)));
  {
    H5Obj s(VK_CHECK(H5, H5Dget_space(d)));
    const int nd = VK_CHECK(H5, H5Sget_simple_extent_ndims(s));
    std::vector<hsize_t> dims(nd);
    VK_CHECK(H5, H5Sget_simple_extent_dims(s, dims.data(), nullptr));
    dims[0] = rows;
    VK_CHECK(H5, H5Dset_extent(d, dims.data()));
  }
  H5Obj fs(VK_CHECK(H5, H5Dget_space(d)));
  const int nd = VK_CHECK(H5, H5Sget_simple_extent_ndims(fs));
  std::vector<hsize_t> dims(nd), start(nd, 0), cnt(nd);
  VK_CHECK(H5, H5Sget_simple_extent_dims(fs, dims.data(), nullptr));
  cnt = dims;
  start[0] = from;
  cnt[0] = data ? count : 0;
  if (width > 0) {
    start[1] = col;
    cnt[1] = width;
  }
  if (!data || count == 0) {
    VK_CHECK(H5, H5Sselect_none(fs));
  } else {
    VK_CHECK(H5, H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr));
  }
  hsize_t n = 1;
  for (auto c : cnt) n *= c;
  H5Obj ms(VK_CHECK(H5, H5Screate_simple(1, &n, nullptr)));
  if (!data || count == 0) VK_CHECK(H5, H5Sselect_none(ms));
  H5Obj dxpl(VK_CHECK(H5, H5Pcreate(H5P_DATASET_XFER)));
  VK_CHECK(H5, H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
  VK_CHECK(H5, H5Dwrite(d, type, ms, fs, dxpl, data ? data : static_cast<const void*>(&n)));
}

// Every dataset of the log cut to `rows` steps and `eval_rows` evaluations,
// then flushed. Collective.
void truncate_rows(hid_t file, hsize_t rows, hsize_t eval_rows) {
  for (const char* n : {"/step_seconds", "/step_wall_seconds", "/cpu_user_seconds", "/cpu_system_seconds",
                        "/input_bytes", "/metrics/step", "/metrics/epoch", "/metrics/samples_seen",
                        "/metrics/samples_trained", "/metrics/teacher_forwards", "/metrics/loss",
                        "/metrics/lr", "/metrics/kept_fraction", "/metrics/images_per_second",
                        "/eval/step", "/eval/epoch", "/eval/test_top1"}) {
    H5Obj d(VK_CHECK(H5, H5Dopen2(file, n, H5P_DEFAULT)));
    H5Obj s(VK_CHECK(H5, H5Dget_space(d)));
    std::vector<hsize_t> dims(VK_CHECK(H5, H5Sget_simple_extent_ndims(s)));
    VK_CHECK(H5, H5Sget_simple_extent_dims(s, dims.data(), nullptr));
    dims[0] = std::string(n).rfind("/eval/", 0) == 0 ? eval_rows : rows;
    VK_CHECK(H5, H5Dset_extent(d, dims.data()));
  }
  VK_CHECK(H5, H5Fflush(file, H5F_SCOPE_GLOBAL));
}

}  // namespace

TimingLog::TimingLog(const std::string& path, const TimingLogAttrs& a, int64_t flush_every,
                     int64_t resume_step)
    : flush_every_(std::max<int64_t>(1, flush_every)) {
  H5Lock lock(h5_mutex());
  const World& w = world();
  if (resume_step >= 0) {
    // Rank 0 checks that the old log is whole and has this rank count.
    int64_t rows[2] = {-1, -1};
    if (w.root() && access(path.c_str(), F_OK) == 0) {
      try {
        H5Obj old = h5_open_read(path, "timing log");
        // A log without /input_bytes (written before it existed) starts anew.
        if (h5_attr_string(old, "format") == kTimingH5.name && h5_attr_int(old, "world_size") == w.size &&
            h5_exists(old, "/input_bytes")) {
          // Keep the rows of steps up to the checkpoint (a killed run may
          // have logged steps after it, and may have died mid-append).
          auto rows_through = [&](const char* steps, const char* other) {
            std::vector<int64_t> v;
            h5_read(old, steps, v);
            const int64_t n = std::min<int64_t>(v.size(), h5_dataset_info(old, other).dims[0]);
            int64_t k = 0;
            while (k < n && v[k] <= resume_step) ++k;
            return k;
          };
          rows[0] = rows_through("/metrics/step", "/step_wall_seconds");
          rows[1] = rows_through("/eval/step", "/eval/test_top1");
        }
      } catch (const UserError&) {
        // An old log HDF5 cannot read (e.g. cut short by a kill): start anew.
        rows[0] = -1;
      }
      if (rows[0] < 0) VK_CHECK(FILE, std::rename(path.c_str(), (path + ".prev").c_str()) == 0);
    }
    broadcast_bytes(rows, sizeof rows, 0);
    if (rows[0] >= 0) {
      file_ = h5_open_parallel(path, true);
      written_ = rows[0];
      evals_written_ = rows[1];
      // Drop the rows after the checkpoint now, and flush: shrinking a chunked
      // dataset rewrites its last chunk through HDF5's chunk cache, and a
      // cached chunk flushed after the next collective write would put the
      // old rows back over the new ones.
      truncate_rows(file_, written_, evals_written_);
      // A resumed run may compute in another precision (an explicit
      // precision.compute over the checkpoint's): the attributes name the
      // precision of the run that appends, the one that wrote last.
      h5_attr_write(file_, "gemm_bf16_flops_per_core", a.gemm_bf16_flops_per_core);
      h5_attr_write(file_, "gemm_flops_per_core", a.gemm_bf16_flops_per_core);
      h5_attr_write(file_, "compute", std::string(choice_name(a.compute)));
      h5_attr_write(file_, "eval_split", std::string(choice_name(a.eval_split)));
      h5_attr_write(file_, "input_transfer", std::string(choice_name(a.input_transfer)));
      h5_attr_write(file_, "all_gather_bytes", a.all_gather_bytes);
      cpu_times(&last_user_, &last_sys_);
      return;
    }
  }
  file_ = h5_create_parallel(path);
  // Attributes are collective metadata: every rank writes the same values.
  h5_write_format(file_, kTimingH5);
  h5_attr_write(file_, "world_size", int64_t(w.size));
  std::vector<char> mine(256, 0), all(256 * w.size);
  std::snprintf(mine.data(), mine.size(), "%s", w.host.c_str());
  VK_CHECK(MPI, MPI_Allgather(mine.data(), 256, MPI_CHAR, all.data(), 256, MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> hosts;
  for (int r = 0; r < w.size; ++r) hosts.emplace_back(all.data() + 256 * r);
  h5_attr_write(file_, "hostnames", hosts);
  h5_attr_write(file_, "mode", std::string(choice_name(a.mode)));
  h5_attr_write(file_, "model", a.model);
  h5_attr_write(file_, "parameters", a.parameters);
  h5_attr_write(file_, "teacher_parameters", a.teacher_parameters);
  h5_attr_write(file_, "flops_per_sample", a.flops_per_sample);
  h5_attr_write(file_, "bytes_per_rank", a.bytes_per_rank);
  h5_attr_write(file_, "gemm_bf16_flops_per_core", a.gemm_bf16_flops_per_core);
  h5_attr_write(file_, "gemm_flops_per_core", a.gemm_bf16_flops_per_core);
  h5_attr_write(file_, "compute", std::string(choice_name(a.compute)));
  h5_attr_write(file_, "eval_split", std::string(choice_name(a.eval_split)));
  h5_attr_write(file_, "threads_per_rank", a.threads_per_rank);
  h5_attr_write(file_, "input_transfer", std::string(choice_name(a.input_transfer)));
  h5_attr_write(file_, "all_gather_bytes", a.all_gather_bytes);
  const hsize_t P = w.size, F = kNumPhases;
  create_extendible(file_, "/step_seconds", H5T_NATIVE_DOUBLE, {P, F});
  {
    H5Obj d(VK_CHECK(H5, H5Dopen2(file_, "/step_seconds", H5P_DEFAULT)));
    h5_attr_write(d, "phases", std::vector<std::string>(kPhaseNames.begin(), kPhaseNames.end()));
    h5_attr_write(d, "units", std::string("seconds"));
  }
  for (const char* n : {"/step_wall_seconds", "/cpu_user_seconds", "/cpu_system_seconds"})
    create_extendible(file_, n, H5T_NATIVE_DOUBLE, {P});
  create_extendible(file_, "/input_bytes", H5T_NATIVE_INT64, {P});
  {
    H5Obj d(VK_CHECK(H5, H5Dopen2(file_, "/input_bytes", H5P_DEFAULT)));
    h5_attr_write(d, "units", std::string("bytes"));
  }
  for (const char* n : {"/metrics/step", "/metrics/epoch", "/metrics/samples_seen",
                        "/metrics/samples_trained", "/metrics/teacher_forwards", "/eval/step", "/eval/epoch"})
    create_extendible(file_, n, H5T_NATIVE_INT64, {});
  for (const char* n : {"/metrics/loss", "/metrics/lr", "/metrics/kept_fraction",
                        "/metrics/images_per_second", "/eval/test_top1"})
    create_extendible(file_, n, H5T_NATIVE_DOUBLE, {});
  cpu_times(&last_user_, &last_sys_);
}

TimingLog::~TimingLog() = default;

void TimingLog::record(const std::array<double, kNumPhases>& phases, double wall, const StepMetrics& m,
                       int64_t input_bytes) {
  phases_.insert(phases_.end(), phases.begin(), phases.end());
  wall_.push_back(wall);
  input_bytes_.push_back(input_bytes);
  double u, s;
  cpu_times(&u, &s);
  user_.push_back(u - last_user_);
  sys_.push_back(s - last_sys_);
  last_user_ = u;
  last_sys_ = s;
  metrics_.push_back(m);
  if (static_cast<int64_t>(metrics_.size()) >= flush_every_) flush();
}

void TimingLog::record_eval(int64_t step, int64_t epoch, double top1) {
  eval_step_.push_back(step);
  eval_epoch_.push_back(epoch);
  eval_top1_.push_back(top1);
}

void TimingLog::flush() {
  const auto t0 = Clock::now();
  append_rows();
  overhead_ += seconds_since(t0);
}

void TimingLog::append_rows() {
  H5Lock lock(h5_mutex());
  const World& w = world();
  const hsize_t k = metrics_.size(), rows = written_ + k, r = w.rank;
  append(file_, "/step_seconds", H5T_NATIVE_DOUBLE, rows, written_, k, phases_.data(), r, 1);
  append(file_, "/step_wall_seconds", H5T_NATIVE_DOUBLE, rows, written_, k, wall_.data(), r, 1);
  append(file_, "/cpu_user_seconds", H5T_NATIVE_DOUBLE, rows, written_, k, user_.data(), r, 1);
  append(file_, "/cpu_system_seconds", H5T_NATIVE_DOUBLE, rows, written_, k, sys_.data(), r, 1);
  append(file_, "/input_bytes", H5T_NATIVE_INT64, rows, written_, k, input_bytes_.data(), r, 1);
  const bool root = w.root();
  auto col_i = [&](int64_t StepMetrics::*f) {
    std::vector<int64_t> v;
    for (auto& m : metrics_) v.push_back(m.*f);
    return v;
  };
  auto col_d = [&](double StepMetrics::*f) {
    std::vector<double> v;
    for (auto& m : metrics_) v.push_back(m.*f);
    return v;
  };
  const std::pair<const char*, int64_t StepMetrics::*> ints[] = {
      {"/metrics/step", &StepMetrics::step}, {"/metrics/epoch", &StepMetrics::epoch},
      {"/metrics/samples_seen", &StepMetrics::samples_seen},
      {"/metrics/samples_trained", &StepMetrics::samples_trained},
      {"/metrics/teacher_forwards", &StepMetrics::teacher_forwards}};
  for (auto& [name, f] : ints) {
    auto v = col_i(f);
    append(file_, name, H5T_NATIVE_INT64, rows, written_, k, root ? v.data() : nullptr);
  }
  const std::pair<const char*, double StepMetrics::*> dbls[] = {
      {"/metrics/loss", &StepMetrics::loss}, {"/metrics/lr", &StepMetrics::lr},
      {"/metrics/kept_fraction", &StepMetrics::kept_fraction},
      {"/metrics/images_per_second", &StepMetrics::images_per_second}};
  for (auto& [name, f] : dbls) {
    auto v = col_d(f);
    append(file_, name, H5T_NATIVE_DOUBLE, rows, written_, k, root ? v.data() : nullptr);
  }
  const hsize_t ne = eval_step_.size(), erows = evals_written_ + ne;
  append(file_, "/eval/step", H5T_NATIVE_INT64, erows, evals_written_, ne, root ? eval_step_.data() : nullptr);
  append(file_, "/eval/epoch", H5T_NATIVE_INT64, erows, evals_written_, ne, root ? eval_epoch_.data() : nullptr);
  append(file_, "/eval/test_top1", H5T_NATIVE_DOUBLE, erows, evals_written_, ne,
         root ? eval_top1_.data() : nullptr);
  VK_CHECK(H5, H5Fflush(file_, H5F_SCOPE_GLOBAL));
  written_ = rows;
  evals_written_ = erows;
  phases_.clear();
  wall_.clear();
  user_.clear();
  sys_.clear();
  input_bytes_.clear();
  metrics_.clear();
  eval_step_.clear();
  eval_epoch_.clear();
  eval_top1_.clear();
}

}  // namespace vitkd
