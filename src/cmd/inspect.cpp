#include "cmd/commands.hpp"
#include "cmd/args.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "data/dataset.hpp"
#include "data/image_store.hpp"
#include "distill/view_cache.hpp"
#include "comm/world.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"
#include "io/timing_log.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

std::string attr_or(hid_t f, const char* name, const std::string& def = "?") {
  if (!h5_attr_exists(f, name)) return def;
  const H5Obj a(VK_CHECK(H5, H5Aopen(f, name, H5P_DEFAULT)));
  const H5Obj t(VK_CHECK(H5, H5Aget_type(a)));
  switch (H5Tget_class(t)) {
    case H5T_STRING: return h5_attr_string(f, name);
    case H5T_INTEGER: return std::to_string(h5_attr_int(f, name));
    case H5T_FLOAT: {
      char b[32];
      std::snprintf(b, sizeof b, "%.6g", h5_attr_double(f, name));
      return b;
    }
    default: return def;
  }
}

int64_t rows(hid_t f, const std::string& d) {
  return h5_exists(f, d) ? h5_dataset_info(f, d).dims.at(0) : 0;
}

void inspect_dataset(const std::string& path) {
  const DatasetMeta m = validate_dataset(path);
  std::printf("%s: vitkd dataset (valid)\n", path.c_str());
  std::printf("  train %lld, test %lld images of %lldx%lldx%lld (HxWxC, uint8)\n",
              (long long)m.train_size, (long long)m.test_size, (long long)m.height,
              (long long)m.width, (long long)m.channels);
  if (m.storage == kStorageJpeg) {  // vitkd prepare folder --store jpeg (data/image_store.hpp)
    H5Lock lock(h5_mutex());
    H5Obj f = h5_open_read(path, "dataset");
    const int64_t bytes = rows(f, "/train/jpeg") + rows(f, "/test/jpeg") + rows(f, "/val/jpeg");
    const double raw = double(m.train_size + m.test_size + m.val_size) * m.height * m.width * m.channels;
    std::printf("  storage: jpeg (format version %lld), quality %lld, %lld bytes of JPEG, %.1f%% of raw pixels "
                "(%.0f bytes per image)\n",
                (long long)kDatasetJpegVersion, (long long)m.jpeg_quality, (long long)bytes, 100.0 * bytes / raw,
                bytes / double(m.train_size + m.test_size + m.val_size));
  } else {
    std::printf("  storage: raw uint8 pixels\n");
  }
  if (m.val_size > 0)  // vitkd prepare --val-fraction (data/validation.hpp)
    std::printf("  val %lld images, carved from the training split (/val/source_indices)\n", (long long)m.val_size);
  std::string names;
  for (size_t i = 0; i < m.class_names.size(); ++i)
    names += (i ? ", " : "") + m.class_names[i];
  std::printf("  %lld classes: %s\n", (long long)m.num_classes, names.c_str());
  for (size_t c = 0; c < m.mean.size(); ++c)
    std::printf("  channel %zu: mean %.4f, std %.4f\n", c, m.mean[c], m.std[c]);
}

void inspect_checkpoint(const std::string& path) {
  const CheckpointInfo info = read_checkpoint_info(path);
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "checkpoint");
  std::printf("%s: vitkd checkpoint (format version %s, written by vitkd %s)\n", path.c_str(),
              attr_or(f, "format_version").c_str(), attr_or(f, "vitkd_version").c_str());
  std::printf("  mode %s, step %lld, epochs done %lld, written at %lld rank(s), test top-1 %.4f\n",
              info.mode.c_str(), (long long)info.step, (long long)info.epoch,
              (long long)info.world_size, info.test_top1);
  std::printf("  model: %s\n", info.spec.describe().c_str());
  if (!info.compute.empty()) std::printf("  computed in %s (fp32 master weights)\n", info.compute.c_str());
  if (!info.has_state) {
    std::printf("  weights only (no optimizer or data state)\n");
    return;
  }
  std::printf("  data cursor: epoch %lld, %s global batches read; samples seen %s, trained %s; "
              "global batch %s; seed %s\n",
              (long long)h5_attr_int(f, "data_epoch") + 1, attr_or(f, "data_batch").c_str(),
              attr_or(f, "samples_seen").c_str(), attr_or(f, "samples_trained").c_str(),
              attr_or(f, "global_batch").c_str(), attr_or(f, "seed").c_str());
  std::printf("  teacher forwards %s, skipped (non-finite) steps %s, training time %s s, %s\n",
              attr_or(f, "teacher_forwards").c_str(), attr_or(f, "bad_steps").c_str(),
              attr_or(f, "train_seconds").c_str(),
              attr_or(f, "complete") == "1" ? "schedule complete" : "schedule not finished (resumable)");
  if (h5_exists(f, "/optimizer")) {
    H5Obj g(VK_CHECK(H5, H5Gopen2(f, "/optimizer", H5P_DEFAULT)));
    std::printf("  optimizer: AdamW m, v over %s parameters (%s padded), %s steps\n",
                attr_or(g, "numel").c_str(), attr_or(g, "padded").c_str(),
                attr_or(g, "adam_steps").c_str());
  }
  std::printf("  sifting: %lld losses in the history, %lld samples pooled\n",
              (long long)rows(f, "/sift/history"), (long long)rows(f, "/sift/pool_index"));
  const auto lines = std::count(info.config.begin(), info.config.end(), '\n');
  std::printf("  configuration: %lld lines of TOML (h5dump -a config %s)\n", (long long)lines,
              path.c_str());
}

void inspect_timing(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "timing log");
  const int64_t n = rows(f, "/step_wall_seconds");
  const int64_t P = h5_attr_int(f, "world_size");
  // ModelSpec::describe, stored as `model`, already names the parameter count; the
  // `parameters` attribute is printed only for a description without it.
  const std::string model = attr_or(f, "model");
  const std::string count = model.find("parameters") == std::string::npos
                                ? " (" + attr_or(f, "parameters") + " parameters)"
                                : "";
  std::printf("%s: vitkd timing log, %s run of %s%s at %lld rank(s), %lld steps logged\n",
              path.c_str(), attr_or(f, "mode").c_str(), model.c_str(), count.c_str(), (long long)P,
              (long long)n);
  const auto hosts = h5_attr_strings(f, "hostnames");
  std::string hs;
  for (size_t i = 0; i < hosts.size(); ++i) hs += (i ? ", " : "") + hosts[i];
  std::printf("  hosts: %s\n", hs.c_str());
  if (n == 0) return;
  std::vector<double> phases, wall;
  h5_read(f, "/step_seconds", phases);
  h5_read(f, "/step_wall_seconds", wall);
  const auto names = h5_attr_strings(H5Obj(VK_CHECK(H5, H5Dopen2(f, "/step_seconds", H5P_DEFAULT))), "phases");
  const int64_t F = static_cast<int64_t>(names.size());
  const double total = std::accumulate(wall.begin(), wall.end(), 0.0) / P;
  std::printf("  mean step %.4f s; per phase (mean over ranks, share of step time):\n", total / n);
  for (int64_t k = 0; k < F && static_cast<int64_t>(phases.size()) == n * P * F; ++k) {
    double s = 0;
    for (int64_t i = 0; i < n * P; ++i) s += phases[i * F + k];
    s /= P;
    if (s > 0) std::printf("    %-16s %9.3f s  %5.1f%%\n", names[k].c_str(), s, 100.0 * s / total);
  }
  std::vector<double> top1;
  if (h5_exists(f, "/eval/test_top1")) h5_read(f, "/eval/test_top1", top1);
  if (!top1.empty()) std::printf("  %zu evaluation(s), last test top-1 %.4f\n", top1.size(), top1.back());
  std::printf("  full report: python3 analysis/report.py <run dir>\n");
}

void inspect_other(const std::string& path) {
  H5Lock lock(h5_mutex());
  H5Obj f = h5_open_read(path, "file");
  std::printf("%s: HDF5 file without a vitkd /format attribute; top-level objects:\n", path.c_str());
  hsize_t n = 0;
  VK_CHECK(H5, H5Gget_num_objs(f, &n));
  for (hsize_t i = 0; i < n; ++i) {
    char name[256] = {0};
    H5Gget_objname_by_idx(f, i, name, sizeof name);
    const std::string p = std::string("/") + name;
    if (H5Gget_objtype_by_idx(f, i) == H5G_DATASET)
      std::printf("  %-24s %s\n", p.c_str(), h5_dataset_info(f, p).describe().c_str());
    else
      std::printf("  %-24s (group)\n", p.c_str());
  }
}

}  // namespace

int inspect_main(const std::vector<std::string>& args) {
  const cli::Command& cmd = cli::command("inspect");
  const cli::Args a = cli::parse(cmd, args);
  if (a.help()) return cli::print_help(cli::help_text(cmd));
  const std::string& path = a.positional("FILE.h5");
  std::string format;
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_open_read(path, "file");
    format = attr_or(f, "format", "");
  }
  if (!world().root()) return kExitOk;
  if (format == kDatasetFormat) inspect_dataset(path);
  else if (format == kCheckpointFormat) inspect_checkpoint(path);
  else if (format == kTimingH5.name) inspect_timing(path);
  else if (format == view_cache_format()) std::fputs(summarize_view_cache(path).c_str(), stdout);
  else inspect_other(path);
  return kExitOk;
}

}  // namespace vitkd
