#include "distill/teacher_cache.hpp"

#include <unistd.h>

#include <cstring>

#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

constexpr H5Format kLogitsH5{"vitkd-teacher-logits", 1, "teacher cache",
                             "delete it; the next run recomputes it"};

TeacherCache::TeacherCache(int64_t n, int64_t classes, std::string teacher, std::string dataset)
    : n_(n), k_(classes), teacher_(std::move(teacher)), dataset_(std::move(dataset)),
      logits_(n * classes, 0.0f), have_(n, 0) {}

torch::Tensor TeacherCache::lookup(const torch::Tensor& idx) const {
  const int64_t m = idx.numel();
  const int64_t* ip = idx.data_ptr<int64_t>();
  for (int64_t i = 0; i < m; ++i)
    if (ip[i] < 0 || ip[i] >= n_ || !have_[ip[i]]) return torch::Tensor();
  auto out = torch::empty({m, k_}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < m; ++i) std::memcpy(o + i * k_, logits_.data() + ip[i] * k_, k_ * sizeof(float));
  hits_ += m;
  return out;
}

void TeacherCache::share(const torch::Tensor& idx, const torch::Tensor& logits) {
  std::vector<double> mine;
  if (idx.defined() && idx.numel() > 0) {
    const int64_t m = idx.numel();
    auto l = logits.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t* ip = idx.data_ptr<int64_t>();
    const float* lp = l.data_ptr<float>();
    mine.reserve(m * (k_ + 1));
    for (int64_t i = 0; i < m; ++i) {
      mine.push_back(static_cast<double>(ip[i]));
      mine.insert(mine.end(), lp + i * k_, lp + (i + 1) * k_);
    }
  }
  const std::vector<double> all = allgatherv(mine);
  for (size_t r = 0; r + k_ + 1 <= all.size(); r += k_ + 1) {
    const int64_t i = static_cast<int64_t>(all[r]);
    if (i < 0 || i >= n_) continue;
    for (int64_t c = 0; c < k_; ++c) logits_[i * k_ + c] = static_cast<float>(all[r + 1 + c]);
    if (!have_[i]) ++filled_;
    have_[i] = 1;
  }
}

bool TeacherCache::save(const std::string& path) const {
  if (filled_ == 0) return false;
  const std::string tmp = path + ".tmp";
  {
    H5Lock lock(h5_mutex());
    H5Obj f = h5_create(tmp);
    h5_write_format(f, kLogitsH5);
    h5_attr_write(f, "dataset", dataset_);
    h5_attr_write(f, "train_size", n_);
    h5_attr_write(f, "classes", k_);
    h5_attr_write(f, "teacher", teacher_);
    h5_write(f, "/logits", logits_.data(), {n_, k_});
    h5_write(f, "/filled", have_.data(), {n_});
    f.close();
  }
  atomic_replace(path, tmp);
  return true;
}

std::string TeacherCache::load(const std::string& path) {
  if (access(path.c_str(), R_OK) != 0) return "teacher cache: starting empty (" + path + ")";
  H5Lock lock(h5_mutex());
  try {
    H5Obj f = h5_open_read(path, "teacher cache");
    if (h5_attr_string(f, "format") != kLogitsH5.name || h5_attr_int(f, "train_size") != n_ ||
        h5_attr_int(f, "classes") != k_ || h5_attr_string(f, "teacher") != teacher_ ||
        h5_attr_string(f, "dataset") != dataset_)
      return "teacher cache: " + path + " belongs to another teacher or dataset; starting empty "
             "(it will be overwritten)";
    h5_read(f, "/logits", logits_.data(), n_ * k_);
    h5_read(f, "/filled", have_.data(), n_);
  } catch (const UserError& e) {
    std::fill(have_.begin(), have_.end(), 0);
    return std::string("teacher cache: cannot use ") + path + " (" + e.what() + "); starting empty";
  }
  filled_ = 0;
  for (auto h : have_) filled_ += h != 0;
  return "teacher cache: loaded " + std::to_string(filled_) + " of " + std::to_string(n_) +
         " samples' logits from " + path;
}

}  // namespace vitkd
