#pragma once
// Shared fixtures of the C++ tests: model shapes and temporary directories.
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "comm/world.hpp"
#include "model/vit.hpp"
#include "util/error.hpp"

namespace vitkd::test {

/// A ModelSpec built field by field:
///   Spec::tiny().dim(10).mlp_ratio(1.5)   or   Spec().image(8).dim(16)
/// Spec() starts from ModelSpec's defaults (the Fashion-MNIST teacher).
class Spec {
 public:
  Spec() = default;
  /// 8x8 one-channel images, patch 4 (4 patches), dim 16, one block of two
  /// heads, MLP ratio 2, 4 classes: a model that trains in milliseconds.
  static Spec tiny() { return Spec().image(8).channels(1).patch(4).dim(16).depth(1).heads(2).mlp_ratio(2.0).classes(4); }

  Spec& image(int64_t v) { s_.image_size = v; return *this; }
  Spec& channels(int64_t v) { s_.channels = v; return *this; }
  Spec& patch(int64_t v) { s_.patch = v; return *this; }
  Spec& dim(int64_t v) { s_.dim = v; return *this; }
  Spec& depth(int64_t v) { s_.depth = v; return *this; }
  Spec& heads(int64_t v) { s_.heads = v; return *this; }
  Spec& mlp_ratio(double v) { s_.mlp_ratio = v; return *this; }
  Spec& classes(int64_t v) { s_.classes = v; return *this; }
  Spec& dist_token(bool v = true) { s_.dist_token = v; return *this; }

  operator ModelSpec() const { return s_; }  // NOLINT: a builder converts implicitly
  const ModelSpec& spec() const { return s_; }

 private:
  ModelSpec s_;
};

/// The tiny model with a parameter count divisible by neither 2 nor 3
/// (1099 parameters), so that shards over 2 and 3 ranks are uneven.
inline ModelSpec odd_spec() { return Spec::tiny().dim(10).mlp_ratio(1.5); }

/// The optimizer tests' global batch of step `step`: 13 samples (divisible
/// by neither 2 nor 3: uneven slices) of odd_spec()'s 1x8x8 images, labels
/// of 4 classes; the same on every rank. {x [13, 1, 8, 8], y [13]}.
inline std::pair<torch::Tensor, torch::Tensor> odd_batch(int step) {
  torch::manual_seed(1000 + step);
  torch::Tensor x = torch::randn({13, 1, 8, 8});
  return {x, torch::randint(0, 4, {13}, torch::kLong)};
}

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
/// when the object goes out of scope. shared = true: collective; rank 0
/// makes it and every rank gets the same path (and removes nothing but rank 0).
class TempDir {
 public:
  explicit TempDir(bool shared = false) : owner_(!shared || world().root()) {
    if (owner_) {
      const char* base = std::getenv("TMPDIR");
      std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vitkd_test_XXXXXX";
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
    }
    if (shared) path_ = broadcast_string(path_);
  }
  ~TempDir() {
    std::error_code ec;
    if (owner_ && !path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  /// path()/name
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  bool owner_;
  std::string path_;
};

/// The message of the UserError `fn` throws, or "" when it throws none.
template <class Fn>
std::string user_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

/// Whether LibTorch multiplies bf16 matrices here. It does on every CPU
/// (natively, or through oneDNN's or its own emulation), except when oneDNN is
/// restricted below bf16 support (ONEDNN_MAX_CPU_ISA=AVX2, the AVX2 test lane)
/// while LibTorch 1.13, which asks cpuinfo and not oneDNN, still sends it bf16
/// products: oneDNN then refuses them.
inline bool bf16_matmul_runs() {
  try {
    auto a = torch::ones({128, 128}, torch::kBFloat16);  // large enough for oneDNN
    (void)torch::matmul(a, a);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
/// Largest |a - b| in units of b's bf16 spacing (2^-8 of b's binade; 2^-133
/// floor): a bf16 result rounded once from a value within fp32 error of the
/// float64 reference b is at most half a unit off; one unit allows for ties.
inline double bf16_ulps(const torch::Tensor& a, const torch::Tensor& b) {
  auto bd = b.to(torch::kDouble), ad = a.to(torch::kDouble);
  auto spacing = torch::exp2(torch::floor(torch::log2(bd.abs().clamp_min(1e-30))) - 7);
  return ((ad - bd).abs() / spacing).max().item<double>();
}

#define VITKD_SKIP_WITHOUT_BF16_MATMUL()                                                   \
  if (!vitkd::test::bf16_matmul_runs())                                                    \
  GTEST_SKIP() << "LibTorch cannot multiply bf16 matrices here (oneDNN restricted below bf16 " \
                  "support, e.g. ONEDNN_MAX_CPU_ISA=AVX2)"

}  // namespace vitkd::test
