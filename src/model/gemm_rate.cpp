#include "model/gemm_rate.hpp"

#include <torch/cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "util/fs.hpp"
#include "util/timing.hpp"

namespace vitkd {

double gemm_rate(int64_t m, int64_t k, int64_t n, torch::ScalarType dtype, double seconds,
                 const torch::Device& device) {
  const auto opt = torch::TensorOptions().dtype(dtype).device(device);
  auto a = torch::randn({m, k}, opt), b = torch::randn({k, n}, opt);
  auto c = torch::matmul(a, b);  // kernel selection and creation happen here, untimed
  if (device.is_cpu()) {
    const double ms = ms_per_call([&] { torch::matmul_out(c, a, b); }, seconds);
    return 2.0 * m * k * n / (ms * 1e-3);
  }
  // A GPU runs asynchronously: time batches of 10 products, waiting once per batch.
  const int batch = 10;
  const double ms = ms_per_call(
      [&] {
        for (int i = 0; i < batch; ++i) torch::matmul_out(c, a, b);
        torch::cuda::synchronize(device.index());
      },
      seconds);
  return 2.0 * m * k * n * batch / (ms * 1e-3);
}

double measure_gemm_flops(torch::ScalarType dtype, double seconds, const torch::Device& device) {
  const int64_t s = device.is_cpu() ? 2048 : 8192;
  return gemm_rate(s, s, s, dtype, seconds, device);
}

std::string ceiling_file() {
  if (const char* f = std::getenv("VITKD_CEILING_FILE"); f && *f) return f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/vitkd/gemm-ceilings.txt";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/vitkd/gemm-ceilings.txt";
}

double kept_ceiling(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  double v = 0;
  while (in >> k >> v)
    if (k == key && v > 0) return v;
  return 0;
}

bool keep_ceiling(const std::string& path, const std::string& key, double flops_per_core) {
  std::vector<std::pair<std::string, double>> lines;
  {
    std::ifstream in(path);
    std::string k;
    double v = 0;
    while (in >> k >> v)
      if (k != key) lines.emplace_back(k, v);
  }
  lines.emplace_back(key, flops_per_core);
  if (!make_dirs(parent_dir(path))) return false;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    char num[32];
    for (const auto& [k, v] : lines) {
      std::snprintf(num, sizeof num, "%.17g", v);  // read back to the same double
      out << k << ' ' << num << '\n';
    }
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace vitkd
