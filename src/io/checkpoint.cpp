#include "io/checkpoint.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"
#include "util/fs.hpp"
#include "util/test_faults.hpp"

namespace vitkd {
namespace {

// Root attributes shared by every checkpoint (identical on every rank, as
// parallel HDF5 needs for attribute writes).
void write_header(hid_t f, const CheckpointInfo& info) {
  h5_write_format(f, kCheckpointH5);
  h5_attr_write(f, "vitkd_version", std::string(VITKD_VERSION));
  h5_attr_write(f, "step", info.step);
  h5_attr_write(f, "epoch", info.epoch);
  h5_attr_write(f, "world_size", info.world_size);
  h5_attr_write(f, "mode", info.mode);
  h5_attr_write(f, "config", info.config);
  h5_attr_write(f, "test_top1", info.test_top1);
  h5_attr_write(f, "has_state", static_cast<int64_t>(info.has_state));
  if (!info.compute.empty()) h5_attr_write(f, "compute", info.compute);
  write_model_spec_attrs(f, info.spec);
}

// Test-only fault injection (util/test_faults.hpp) at one stage of the write.
void maybe_inject_checkpoint_fault(TestFaults::CheckpointStage stage) {
  const TestFaults& f = TestFaults::get();
  if (f.checkpoint_stage != stage) return;
  if (f.checkpoint_kill_rank == world().rank) std::raise(SIGKILL);
  // As a failing HDF5 call does (VK_CHECK): no unwinding through collective closes.
  if (f.checkpoint_fail_rank == world().rank)
    die(kExitRuntime, "checkpoint write failed halfway (test-only fault VITKD_TEST_CHECKPOINT_FAULT)");
}

// Every /model dataset must exist with the parameter's shape.
void check_model_datasets(hid_t f, const std::string& path, ViT& model) {
  for (auto& p : model->named_parameters()) {
    const std::string d = "/model/" + p.key();
    if (!h5_exists(f, d))
      throw UserError(path + ": missing dataset '" + d + "'; the checkpoint does not match this model");
    auto info = h5_dataset_info(f, d);
    if (info.dims != p.value().sizes().vec() || info.type_class != H5T_FLOAT)
      throw UserError(path + ": dataset '" + d + "' is " + info.describe() +
                      ", but the model expects " +
                      H5DatasetInfo{p.value().sizes().vec(), H5T_FLOAT, 4, true}.describe() +
                      "; the checkpoint is from another model shape");
  }
}

int64_t step_of(const std::string& name) {  // "checkpoint-step00000012.h5" -> 12, else -1
  const std::string pre = "checkpoint-step", suf = ".h5";
  if (name.size() <= pre.size() + suf.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// Step files in `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> step_files(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const int64_t s = step_of(e->d_name);
    if (s >= 0) out.emplace_back(s, dir + "/" + e->d_name);
  }
  closedir(d);
  std::sort(out.rbegin(), out.rend());
  return out;
}

bool file_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// EvalRecords <-> the rows of /state/evaluations (kEvalRecordColumns each).
std::vector<double> eval_rows(const std::vector<EvalRecord>& evals) {
  std::vector<double> rows;
  for (const EvalRecord& e : evals)
    rows.insert(rows.end(), {double(e.step), double(e.epoch), double(e.samples_seen), e.train_seconds,
                             e.elapsed_seconds, e.test_top1});
  return rows;
}
std::vector<EvalRecord> eval_records(const std::vector<double>& rows) {
  std::vector<EvalRecord> evals(rows.size() / kEvalRecordColumns);
  for (size_t i = 0; i < evals.size(); ++i) {
    const double* r = &rows[i * kEvalRecordColumns];
    evals[i] = {int64_t(r[0]), int64_t(r[1]), int64_t(r[2]), r[3], r[4], r[5]};
  }
  return evals;
}

}  // namespace

namespace {
// Model-spec attribute values: bool is stored as an int64 0/1.
void put_attr(hid_t f, const std::string& n, int64_t v) { h5_attr_write(f, n, v); }
void put_attr(hid_t f, const std::string& n, double v) { h5_attr_write(f, n, v); }
void put_attr(hid_t f, const std::string& n, bool v) { h5_attr_write(f, n, int64_t(v)); }
void get_attr(hid_t f, const std::string& n, int64_t& v) { v = h5_attr_int(f, n); }
void get_attr(hid_t f, const std::string& n, double& v) { v = h5_attr_double(f, n); }
void get_attr(hid_t f, const std::string& n, bool& v) { v = h5_attr_int(f, n) != 0; }
// A configuration choice (model.init, model.decay), as its word.
template <class E, std::enable_if_t<is_choice<E>::value, int> = 0> void put_attr(hid_t f, const std::string& n, E v) {
  h5_attr_write(f, n, std::string(choice_name(v)));
}
template <class E, std::enable_if_t<is_choice<E>::value, int> = 0> void get_attr(hid_t f, const std::string& n, E& v) {
  const std::string word = h5_attr_string(f, n);
  const auto value = parse_choice<E>(word);
  if (!value)
    throw UserError("attribute " + n + " = \"" + word + "\" is not one of " + choice_list<E>() +
                    "; the checkpoint is corrupt or from a newer vitkd");
  v = *value;
}
}  // namespace

void write_model_spec_attrs(hid_t f, const ModelSpec& s) {
#define VITKD_PUT(type, name, def, meaning) put_attr(f, "model_" #name, s.name);
  VITKD_MODEL_SPEC_FIELDS(VITKD_PUT)
#undef VITKD_PUT
}

void write_model_weights(hid_t f, ViT& model) {
  torch::NoGradGuard ng;
  for (const auto& p : model->named_parameters()) {
    auto t = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();  // host copy (any device)
    h5_write(f, "/model/" + p.key(), t.data_ptr<float>(), t.sizes().vec());
  }
}

void save_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info) {
  const std::string tmp = path + ".tmp";
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create(tmp);
    write_header(f, info);
    write_model_weights(f, model);
    f.close();
  }
  atomic_replace(path, tmp);
}

void save_training_checkpoint(const std::string& path, ViT& model, const CheckpointInfo& info,
                              const TrainState& st, const OptimizerShard& opt) {
  const World& w = world();
  const std::string tmp = path + ".tmp";
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create_parallel(tmp);
    CheckpointInfo hi = info;
    hi.has_state = true;
    write_header(f, hi);
    h5_attr_write(f, "seed", static_cast<int64_t>(st.seed));
    h5_attr_write(f, "global_batch", st.global_batch);
    h5_attr_write(f, "data_epoch", st.data_epoch);
    h5_attr_write(f, "data_batch", st.data_batch);
    h5_attr_write(f, "samples_seen", st.samples_seen);
    h5_attr_write(f, "samples_trained", st.samples_trained);
    h5_attr_write(f, "samples_kept", st.samples_kept);
    h5_attr_write(f, "teacher_forwards", st.teacher_forwards);
    h5_attr_write(f, "bad_steps", st.bad_steps);
    h5_attr_write(f, "train_seconds", st.train_seconds);
    h5_attr_write(f, "eval_seconds", st.eval_seconds);
    h5_attr_write(f, "complete", static_cast<int64_t>(st.complete));

    // Weights: the datasets are created collectively, rank 0 writes the data.
    torch::NoGradGuard ng;
    for (const auto& p : model->named_parameters()) {
      H5Obj d = h5_create_dataset(f, "/model/" + p.key(), H5T_NATIVE_FLOAT, p.value().sizes().vec());
      if (w.root()) {
        auto t = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();  // host copy (any device)
        h5_write_slab(d, 0, t.numel() ? t.size(0) : 0, t.data_ptr<float>(), false);
      }
    }
    maybe_inject_checkpoint_fault(TestFaults::CheckpointStage::Write);

    // Optimizer moments: each rank writes its 1/P of the padded buffer, as one
    // contiguous independent write. (Independent, not collective, transfers:
    // with collective MPI-IO a write error such as a full disk surfaces on the
    // aggregator only and can leave the other ranks waiting; this way every
    // failing rank reports its own error and aborts the job.)
    const int64_t part = opt.padded / w.size, first = w.rank * part;
    if (first < opt.shard.offset || first + part > opt.shard.offset + opt.shard.size)
      die(kExitRuntime, "checkpoint: rank " + std::to_string(w.rank) + " does not hold elements [" +
                            std::to_string(first) + ", " + std::to_string(first + part) +
                            ") of the optimizer state (internal error)");
    for (const char* name : {"m", "v"}) {
      H5Obj d = h5_create_dataset(f, std::string("/optimizer/") + name, H5T_NATIVE_FLOAT, {opt.padded});
      const float* src = (name[0] == 'm' ? opt.m : opt.v) + (first - opt.shard.offset);
      h5_write_slab(d, first, part, src, false);
    }
    {
      H5Obj g(VK_CHECK(H5, H5Gopen2(f, "/optimizer", H5P_DEFAULT)));
      h5_attr_write(g, "numel", opt.numel);
      h5_attr_write(g, "padded", opt.padded);
      h5_attr_write(g, "adam_steps", opt.adam_steps);
    }

    // Sifting: the history (the same on every rank) and every rank's pool.
    {
      H5Obj d = h5_create_dataset(f, "/sift/history", H5T_NATIVE_DOUBLE,
                                  {static_cast<int64_t>(st.sift_history.size())});
      if (w.root()) h5_write_slab(d, 0, st.sift_history.size(), st.sift_history.data(), false);
    }
    const std::vector<double> counts = allgather(static_cast<double>(st.pool_index.size()));
    int64_t total = 0, mine_first = 0;
    for (int r = 0; r < w.size; ++r) {
      if (r == w.rank) mine_first = total;
      total += static_cast<int64_t>(counts[r]);
    }
    const int64_t mine = static_cast<int64_t>(st.pool_index.size());
    {
      H5Obj d = h5_create_dataset(f, "/sift/pool_index", H5T_NATIVE_INT64, {total});
      h5_write_slab(d, mine_first, mine, st.pool_index.data(), false);
    }
    {
      std::vector<int64_t> c(counts.begin(), counts.end());
      H5Obj d = h5_create_dataset(f, "/sift/pool_counts", H5T_NATIVE_INT64, {int64_t(w.size)});
      if (w.root()) h5_write_slab(d, 0, w.size, c.data(), false);
    }
    if (st.logit_dim > 0) {
      H5Obj d = h5_create_dataset(f, "/sift/pool_teacher_logits", H5T_NATIVE_FLOAT, {total, st.logit_dim});
      h5_write_slab(d, mine_first, mine, st.pool_logits.data(), false);
    }
    {
      H5Obj d = h5_create_dataset(f, "/state/test_top1_per_epoch", H5T_NATIVE_DOUBLE,
                                  {static_cast<int64_t>(st.top1_per_epoch.size())});
      if (w.root()) h5_write_slab(d, 0, st.top1_per_epoch.size(), st.top1_per_epoch.data(), false);
    }
    {
      const std::vector<double> rows = eval_rows(st.evaluations);
      const int64_t n = static_cast<int64_t>(st.evaluations.size());
      H5Obj d = h5_create_dataset(f, "/state/evaluations", H5T_NATIVE_DOUBLE, {n, kEvalRecordColumns});
      if (w.root()) h5_write_slab(d, 0, n, rows.data(), false);
    }
    f.close();  // collective: every rank has finished writing when it returns
  }
  // Durable: every rank syncs the file (on a parallel file system each node
  // flushes the parts it wrote), then rank 0 renames it into place and syncs
  // the directory. A crash at any point leaves the previous file or the new one.
  VK_CHECK(FILE, sync_file(tmp));
  barrier();
  maybe_inject_checkpoint_fault(TestFaults::CheckpointStage::Rename);
  if (w.root()) {
    VK_CHECK(FILE, std::rename(tmp.c_str(), path.c_str()) == 0);
    maybe_inject_checkpoint_fault(TestFaults::CheckpointStage::Renamed);
    VK_CHECK(FILE, sync_dir(parent_dir(path)));
  } else {
    maybe_inject_checkpoint_fault(TestFaults::CheckpointStage::Renamed);
  }
  barrier();
}

std::string checkpoint_step_path(const std::string& out_dir, int64_t step) {
  char b[64];
  std::snprintf(b, sizeof b, "/checkpoint-step%08lld.h5", static_cast<long long>(step));
  return out_dir + b;
}

void publish_checkpoint(const std::string& out_dir, const std::string& step_file, int64_t keep) {
  const std::string current = out_dir + "/checkpoint.h5", link_tmp = current + ".link";
  std::remove(link_tmp.c_str());
  if (link(step_file.c_str(), link_tmp.c_str()) == 0) {
    VK_CHECK(FILE, std::rename(link_tmp.c_str(), current.c_str()) == 0);
  } else {
    // No hard links on this file system: keep a copy-free rename instead
    // (checkpoint.h5 is then the only copy of the newest checkpoint).
    VK_CHECK(FILE, std::rename(step_file.c_str(), current.c_str()) == 0);
  }
  VK_CHECK(FILE, sync_dir(out_dir));  // checkpoint.h5 survives a crash from here on
  auto files = step_files(out_dir);
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < files.size(); ++i)
    std::remove(files[i].second.c_str());
  // Half-written files of killed writers are garbage once a newer checkpoint is in place.
  if (DIR* d = opendir(out_dir.c_str())) {
    std::vector<std::string> stale;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 7 && n.compare(n.size() - 7, 7, ".h5.tmp") == 0 && step_of(n.substr(0, n.size() - 4)) >= 0)
        stale.push_back(out_dir + "/" + n);
    }
    closedir(d);
    for (auto& f : stale) std::remove(f.c_str());
  }
}

std::vector<std::string> checkpoint_candidates(const std::string& out_dir) {
  std::vector<std::string> out;
  if (file_exists(out_dir + "/checkpoint.h5")) out.push_back(out_dir + "/checkpoint.h5");
  for (auto& s : step_files(out_dir)) out.push_back(s.second);
  return out;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  auto need = [&](const char* a) {
    if (!h5_attr_exists(f, a))
      throw UserError(path + ": missing attribute '/" + std::string(a) +
                      "' (not a vitkd checkpoint?); point at a checkpoint.h5 written by vitkd train");
  };
  h5_require_format(f, path, kCheckpointH5);
  CheckpointInfo info;
  for (const char* a : {"step", "epoch", "world_size", "mode", "config"}) need(a);
  // Fields added after format 1 shipped: a checkpoint without them has the
  // values every earlier vitkd used (set below).
  auto added_later = [](const std::string& n) { return n == "norm_eps" || n == "init" || n == "decay"; };
#define VITKD_NEED(type, name, def, meaning) \
  if (!added_later(#name)) need("model_" #name);
  VITKD_MODEL_SPEC_FIELDS(VITKD_NEED)
#undef VITKD_NEED
  info.step = h5_attr_int(f, "step");
  info.epoch = h5_attr_int(f, "epoch");
  info.world_size = h5_attr_int(f, "world_size");
  info.mode = h5_attr_string(f, "mode");
  info.config = h5_attr_string(f, "config");
  if (h5_attr_exists(f, "test_top1")) info.test_top1 = h5_attr_double(f, "test_top1");
  info.has_state = h5_attr_exists(f, "has_state") && h5_attr_int(f, "has_state") != 0;
  if (h5_attr_exists(f, "compute")) info.compute = h5_attr_string(f, "compute");
  ModelSpec& s = info.spec;
  // What every vitkd before these attributes did, whatever the defaults are now.
  s.norm_eps = 1e-6;
  s.init = InitScheme::TruncNormal;
  s.decay = DecayScope::Matrices;
#define VITKD_GET(type, name, def, meaning) \
  if (h5_attr_exists(f, "model_" #name)) get_attr(f, "model_" #name, s.name);
  VITKD_MODEL_SPEC_FIELDS(VITKD_GET)
#undef VITKD_GET
  if (s.image_size < 1 || s.channels < 1 || s.patch < 1 || s.image_size % s.patch != 0 ||
      s.dim < 1 || s.depth < 1 || s.heads < 1 || s.dim % s.heads != 0 || !(s.mlp_ratio > 0) ||
      s.classes < 2)
    throw UserError(path + ": the model attributes describe an invalid ViT (" + s.describe() +
                    "); the checkpoint is corrupt");
  if (info.step < 0 || info.epoch < 0 || info.world_size < 1)
    throw UserError(path + ": invalid step, epoch or world_size attribute; the checkpoint is corrupt");
  return info;
}

void load_checkpoint_weights(const std::string& path, ViT& model) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  check_model_datasets(f, path, model);
  torch::NoGradGuard ng;
  for (auto& p : model->named_parameters()) {
    auto buf = torch::empty(p.value().sizes(), torch::kFloat32);
    h5_read(f, "/model/" + p.key(), buf.data_ptr<float>(), buf.numel());
    p.value().copy_(buf);
  }
}

CheckpointInfo validate_training_checkpoint(const std::string& path, ViT& model, int64_t numel) {
  CheckpointInfo info = read_checkpoint_info(path);
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  if (!info.has_state)
    throw UserError(path + ": holds weights only, no optimizer or data state, so training cannot "
                    "resume from it; use it as teacher.checkpoint, or set " +
                    setting_text("checkpoint.resume", ResumeKind::Never));
  for (const char* a : {"seed", "global_batch", "data_epoch", "data_batch", "samples_seen",
                        "samples_trained", "teacher_forwards", "bad_steps", "train_seconds", "complete"})
    if (!h5_attr_exists(f, a))
      throw UserError(path + ": missing attribute '/" + std::string(a) + "'; the checkpoint is corrupt");
  check_model_datasets(f, path, model);
  auto expect = [&](const std::string& d, H5T_class_t cls, int rank_, int64_t min_len) {
    if (!h5_exists(f, d))
      throw UserError(path + ": missing dataset '" + d + "'; the checkpoint is incomplete or corrupt");
    auto di = h5_dataset_info(f, d);
    if (di.type_class != cls || static_cast<int>(di.dims.size()) != rank_ || di.dims[0] < min_len)
      throw UserError(path + ": dataset '" + d + "' is " + di.describe() +
                      ", which does not fit this model; the checkpoint is from another model or corrupt");
    return di;
  };
  for (const char* d : {"/optimizer/m", "/optimizer/v"}) expect(d, H5T_FLOAT, 1, numel);
  {
    H5Obj g(VK_CHECK(H5, H5Gopen2(f, "/optimizer", H5P_DEFAULT)));
    if (!h5_attr_exists(g, "numel") || h5_attr_int(g, "numel") != numel || !h5_attr_exists(g, "adam_steps"))
      throw UserError(path + ": /optimizer holds state for " +
                      (h5_attr_exists(g, "numel") ? std::to_string(h5_attr_int(g, "numel")) : "?") +
                      " parameters, this model has " + std::to_string(numel) +
                      "; the checkpoint is from another model shape");
  }
  expect("/sift/history", H5T_FLOAT, 1, 0);
  auto pi = expect("/sift/pool_index", H5T_INTEGER, 1, 0);
  auto pc = expect("/sift/pool_counts", H5T_INTEGER, 1, info.world_size);
  (void)pc;
  if (h5_exists(f, "/sift/pool_teacher_logits")) {
    auto pl = h5_dataset_info(f, "/sift/pool_teacher_logits");
    if (pl.dims.size() != 2 || pl.dims[0] != pi.dims[0])
      throw UserError(path + ": /sift/pool_teacher_logits is " + pl.describe() + " for " +
                      std::to_string(pi.dims[0]) + " pooled samples; the checkpoint is corrupt");
  }
  expect("/state/test_top1_per_epoch", H5T_FLOAT, 1, 0);
  if (h5_exists(f, "/state/evaluations")) {  // optional: older checkpoints lack it
    auto di = h5_dataset_info(f, "/state/evaluations");
    if (di.type_class != H5T_FLOAT || di.dims.size() != 2 || di.dims[1] != kEvalRecordColumns)
      throw UserError(path + ": /state/evaluations is " + di.describe() + ", expected float64 [n," +
                      std::to_string(kEvalRecordColumns) + "]; the checkpoint is corrupt");
  }
  return info;
}

TrainState load_training_checkpoint(const std::string& path, ViT& model, OptimizerShard& opt,
                                    int rank, int world_size) {
  const CheckpointInfo info = validate_training_checkpoint(path, model, opt.numel);
  load_checkpoint_weights(path, model);
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  TrainState st;
  st.seed = static_cast<uint64_t>(h5_attr_int(f, "seed"));
  st.global_batch = h5_attr_int(f, "global_batch");
  st.data_epoch = h5_attr_int(f, "data_epoch");
  st.data_batch = h5_attr_int(f, "data_batch");
  st.samples_seen = h5_attr_int(f, "samples_seen");
  st.samples_trained = h5_attr_int(f, "samples_trained");
  // Older checkpoints lack it: there, every trained sample was a kept one.
  st.samples_kept = h5_attr_exists(f, "samples_kept") ? h5_attr_int(f, "samples_kept") : st.samples_trained;
  st.teacher_forwards = h5_attr_int(f, "teacher_forwards");
  st.bad_steps = h5_attr_int(f, "bad_steps");
  st.train_seconds = h5_attr_double(f, "train_seconds");
  st.complete = h5_attr_int(f, "complete") != 0;
  h5_read(f, "/sift/history", st.sift_history);
  h5_read(f, "/state/test_top1_per_epoch", st.top1_per_epoch);
  // Older checkpoints lack both: no evaluations recorded, none of the time evaluating.
  st.eval_seconds = h5_attr_exists(f, "eval_seconds") ? h5_attr_double(f, "eval_seconds") : 0.0;
  if (h5_exists(f, "/state/evaluations")) {
    std::vector<double> rows;
    h5_read(f, "/state/evaluations", rows);
    st.evaluations = eval_records(rows);
  }

  // Moments: this rank's range of the (possibly differently padded) buffer;
  // elements past the real parameters are padding and stay zero.
  {
    H5Obj g(VK_CHECK(H5, H5Gopen2(f, "/optimizer", H5P_DEFAULT)));
    opt.adam_steps = h5_attr_int(g, "adam_steps");
  }
  const int64_t lo = opt.shard.offset, hi = std::min(opt.shard.offset + opt.shard.size, opt.numel);
  std::fill(opt.m, opt.m + opt.shard.size, 0.0f);
  std::fill(opt.v, opt.v + opt.shard.size, 0.0f);
  if (hi > lo) {
    H5Obj dm(VK_CHECK(H5, H5Dopen2(f, "/optimizer/m", H5P_DEFAULT)));
    H5Obj dv(VK_CHECK(H5, H5Dopen2(f, "/optimizer/v", H5P_DEFAULT)));
    h5_read_slab(dm, lo, hi - lo, opt.m);
    h5_read_slab(dv, lo, hi - lo, opt.v);
  }

  // Pooled samples: the same rank's share at the same rank count, an even
  // split of all of them otherwise.
  std::vector<int64_t> counts;
  h5_read(f, "/sift/pool_counts", counts);
  int64_t total = 0;
  for (auto c : counts) total += c;
  int64_t first = 0, n = 0;
  if (static_cast<int64_t>(counts.size()) == world_size) {
    for (int r = 0; r < rank; ++r) first += counts[r];
    n = counts[rank];
  } else {
    first = total * rank / world_size;
    n = total * (rank + 1) / world_size - first;
  }
  st.pool_index.resize(n);
  {
    H5Obj d(VK_CHECK(H5, H5Dopen2(f, "/sift/pool_index", H5P_DEFAULT)));
    h5_read_slab(d, first, n, st.pool_index.data());
  }
  if (h5_exists(f, "/sift/pool_teacher_logits")) {
    auto di = h5_dataset_info(f, "/sift/pool_teacher_logits");
    st.logit_dim = di.dims[1];
    st.pool_logits.resize(n * st.logit_dim);
    H5Obj d(VK_CHECK(H5, H5Dopen2(f, "/sift/pool_teacher_logits", H5P_DEFAULT)));
    h5_read_slab(d, first, n, st.pool_logits.data());
  }
  (void)info;
  return st;
}

}  // namespace vitkd
