#include "distill/teacher.hpp"

#include <torch/script.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "data/dataset.hpp"
#include "comm/world.hpp"
#include "io/checkpoint.hpp"
#include "data/fits_model.hpp"
#include "model/vit.hpp"
#include "util/error.hpp"
#include "util/hash.hpp"
#include "util/torch_compat.hpp"

namespace vitkd {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += ',';
    o += std::to_string(s[i]);
  }
  return o + "]";
}

// The last non-empty line of a LibTorch message (TorchScript errors end with
// the Python-style exception line), shortened to fit a one-line error.
std::string last_line(const std::string& msg) {
  std::istringstream in(msg);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  const size_t b = last.find_first_not_of(" \t");
  last = b == std::string::npos ? std::string("(no message)") : last.substr(b);
  if (last.size() > 300) last = last.substr(0, 297) + "...";
  return last;
}

// A hash of tensors' bytes (shapes, dtypes and values), as 16 hex digits.
std::string weights_hash(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 0x7669746b64ULL;  // "vitkd"
  for (const torch::Tensor& t0 : tensors) {
    const torch::Tensor t = t0.detach().to(torch::kCPU).contiguous();
    h = hash64(h, static_cast<uint64_t>(t.scalar_type()), static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.sizes()) h = hash64(h, static_cast<uint64_t>(d));
    const auto* p = static_cast<const unsigned char*>(t.data_ptr());
    const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = mix64(h ^ w);
    }
    uint64_t w = 0;
    std::memcpy(&w, p + i, bytes - i);
    h = hash64(h, w);
  }
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

// ---- a vitkd ViT checkpoint --------------------------------------------------
class CheckpointTeacher : public Teacher {
 public:
  CheckpointTeacher(const std::string& path, const DatasetMeta& m, int64_t view_side, bool bf16,
                    AttentionKernel attention)
      : path_(path), bf16_(bf16) {
    info_ = read_checkpoint_info(path);
    const ModelSpec& s = info_.spec;
    const std::string who = "teacher checkpoint " + path;
    check_spec_fits_data(s, m, who, "", "distill on the data the teacher was trained for", view_side);
    model_ = ViT(s);
    load_checkpoint_weights(path, model_);
    model_->set_attention(attention);
    id_ = s.describe() + ", weights " + weights_hash(model_->parameters());
    // Frozen: the attention scale in the query weights, and in a bf16 run
    // the matrix weights cast to bf16 once (model/vit.hpp).
    freeze_for_inference(*model_, bf16_);
  }
  torch::Tensor logits(const torch::Tensor& x) override {
    torch::Tensor out;
    {
      c10::InferenceMode frozen;  // no autograd records, version counters or saved activations
      AutocastBf16 ac(bf16_, device_);
      out = model_->forward(x).prediction().to(torch::kFloat32);
    }
    return out.clone();  // a normal tensor: the loss may save it for backward, an inference tensor not
  }
  void to(const torch::Device& d) override {
    model_->to(d);
    device_ = d.type();
  }
  int64_t parameters() const override { return info_.spec.parameter_count(); }
  double forward_flops() const override { return info_.spec.forward_flops(); }
  std::string describe() const override {
    // An imported checkpoint (analysis/vitkd_import.py) was never evaluated by vitkd.
    // The fp32 checkpoint's matrix weights, cast once at load in a bf16 run.
    const std::string cast = bf16_ ? "; its fp32 matrix weights cast to bf16 once, at load" : "";
    if (info_.test_top1 < 0) return info_.spec.describe() + " from " + path_ + " (not evaluated by vitkd)" + cast;
    char b[64];
    std::snprintf(b, sizeof b, "%.4f", info_.test_top1);
    return info_.spec.describe() + " from " + path_ + " (test top-1 " + b + ")" + cast;
  }
  std::string identity() const override { return id_; }

 private:
  std::string path_;
  std::string id_;
  bool bf16_;
  torch::DeviceType device_ = torch::kCPU;
  CheckpointInfo info_;
  ViT model_{nullptr};
};

// ---- any TorchScript module: images -> logits ---------------------------------
class TorchScriptTeacher : public Teacher {
 public:
  TorchScriptTeacher(const std::string& path, const DatasetMeta& m, bool bf16) : path_(path) {
    const std::string key = "teacher.torchscript '" + path + "'";
    if (access(path.c_str(), R_OK) != 0)
      throw UserError("cannot read " + key + ": " + std::strerror(errno) +
                      "; save the teacher with torch.jit.save(torch.jit.script(model), PATH)");
    try {
      module_ = torch::jit::load(path, torch::kCPU);
    } catch (const c10::Error& e) {
      throw UserError(key + " is not a TorchScript file (torch.jit.load: " +
                      last_line(e.what_without_backtrace()) +
                      "); save the teacher with torch.jit.save(torch.jit.script(model), PATH)");
    }
    module_.eval();
    std::vector<torch::Tensor> weights;
    for (auto p : module_.parameters()) {
      p.set_requires_grad(false);
      params_ += p.numel();
      weights.push_back(p);
    }
    for (auto b : module_.buffers()) weights.push_back(b);
    id_ = "TorchScript module, " + std::to_string(params_) + " parameters, weights " + weights_hash(weights);
    // A dummy batch of the dataset's input size; 2 samples so that a module
    // that drops or fixes the batch axis is caught too.
    const std::vector<int64_t> in_shape{2, m.channels, m.height, m.width};
    const std::vector<int64_t> want{2, m.num_classes};
    const std::string fix = "export the teacher for " + std::to_string(m.channels) + "x" +
                            std::to_string(m.height) + "x" + std::to_string(m.width) +
                            " images and " + std::to_string(m.num_classes) +
                            " classes, or distill on a dataset that matches it";
    const auto dummy = torch::linspace(-1.0, 1.0, 2 * m.channels * m.height * m.width)
                           .reshape(in_shape);
    torch::Tensor out;
    try {
      out = run(dummy, false);
    } catch (const UserError& e) {
      throw UserError(key + ": " + e.what() + "; " + fix);
    } catch (const c10::Error& e) {
      throw UserError(key + " fails on a dummy batch float " + shape_str(in_shape) +
                      " (the input size of " + m.path + "): " + last_line(e.what_without_backtrace()) +
                      "; " + fix);
    } catch (const std::exception& e) {  // e.g. an exception raised by the module's code
      throw UserError(key + " fails on a dummy batch float " + shape_str(in_shape) +
                      " (the input size of " + m.path + "): " + last_line(e.what()) + "; " + fix);
    }
    if (out.sizes().vec() != want)
      throw UserError(key + " maps float " + shape_str(in_shape) + " to " +
                      shape_str(out.sizes().vec()) + ", expected logits " + shape_str(want) + " (" +
                      std::to_string(m.num_classes) + " classes in " + m.path + "); " + fix);
    if (bf16) {
      std::string why;
      double change = 0;
      try {
        auto o16 = run(dummy, true);
        if (o16.sizes().vec() != want) why = "output shape " + shape_str(o16.sizes().vec());
        else if (!torch::isfinite(o16.to(torch::kFloat32)).all().item<bool>()) why = "non-finite logits";
        else
          change = (o16.to(torch::kFloat32) - out.to(torch::kFloat32)).abs().max().item<double>() /
                   std::max(1.0, out.abs().max().item<double>());
      } catch (const UserError& e) {
        why = e.what();
      } catch (const c10::Error& e) {
        why = last_line(e.what_without_backtrace());
      } catch (const std::exception& e) {  // e.g. an exception raised by the module's code
        why = last_line(e.what());
      }
      if (why.empty()) {
        bf16_ = true;
        // 0 means the module computes in fp32 whatever autocast says.
        log0("teacher: %s under bf16 autocast: dummy-batch logits differ from fp32 by %.2e "
             "(relative to max(1, max|logit|))\n", path.c_str(), change);
      } else {
        fallback_ = why;
        log0("teacher: %s does not run under bf16 autocast (%s); running it in fp32\n",
             path.c_str(), why.c_str());
      }
    }
  }
  torch::Tensor logits(const torch::Tensor& x) override { return run(x, bf16_).to(torch::kFloat32); }
  int64_t parameters() const override { return params_; }
  double forward_flops() const override { return 0.0; }
  std::string identity() const override { return id_; }
  std::string describe() const override {
    return "TorchScript module " + path_ + " (" + std::to_string(params_) + " parameters, " +
           (bf16_ ? std::string("bf16 autocast")
                  : std::string(choice_name(Precision::Fp32)) +
                        (fallback_.empty() ? "" : ": bf16 failed (" + fallback_ + ")")) +
           ", FLOPs unknown: MFU counts the student only)";
  }
  void to(const torch::Device& d) override {
    module_.to(d);
    device_ = d.type();
  }

 private:
  torch::Tensor run(const torch::Tensor& x, bool bf16) {
    torch::jit::IValue out;
    {
      c10::InferenceMode frozen;  // as CheckpointTeacher::logits
      AutocastBf16 ac(bf16, device_);
      std::vector<torch::jit::IValue> in{x};
      out = module_.forward(in);
    }
    if (!out.isTensor())
      throw UserError("forward returns " + out.tagKind() +
                      ", not a tensor of logits; make forward return the logits [N,K]");
    return out.toTensor().clone();  // a normal tensor (see CheckpointTeacher::logits)
  }

  std::string path_;
  std::string id_;
  torch::jit::Module module_;
  bool bf16_ = false;
  torch::DeviceType device_ = torch::kCPU;
  std::string fallback_;  // why bf16 was not used ("" = not asked or worked)
  int64_t params_ = 0;
};

// ---- an ensemble of checkpoints (teacher.checkpoint = [...]) -------------------
// Its targets are the mean of the members' probabilities at the distillation
// temperature tau: logits() returns tau * log(mean_i softmax(t_i / tau)),
// whose softmax at tau is exactly that mean (and whose argmax is the mean's).
class EnsembleTeacher : public Teacher {
 public:
  EnsembleTeacher(std::vector<std::unique_ptr<Teacher>> members, double tau)
      : members_(std::move(members)), tau_(tau) {}
  torch::Tensor logits(const torch::Tensor& x) override {
    torch::NoGradGuard ng;
    torch::Tensor sum;
    for (auto& m : members_) {
      const torch::Tensor p = torch::softmax(m->logits(x).to(torch::kFloat64) / tau_, 1);
      sum = sum.defined() ? sum + p : p;
    }
    return (tau_ * torch::log(sum / static_cast<double>(members_.size()))).to(torch::kFloat32);
  }
  int64_t parameters() const override {
    int64_t n = 0;
    for (const auto& m : members_) n += m->parameters();
    return n;
  }
  double forward_flops() const override {
    double f = 0;
    for (const auto& m : members_) f += m->forward_flops();
    return f;
  }
  std::string describe() const override {
    char t[32];
    std::snprintf(t, sizeof t, "%g", tau_);
    std::string s = "ensemble of " + std::to_string(members_.size()) + " teachers (mean probabilities at tau " +
                    t + "):";
    for (size_t i = 0; i < members_.size(); ++i) s += (i ? "; " : " ") + members_[i]->describe();
    return s;
  }
  std::string identity() const override {
    char t[32];
    std::snprintf(t, sizeof t, "%g", tau_);
    std::string s = std::string("ensemble at tau ") + t + ":";
    for (const auto& m : members_) s += " [" + m->identity() + "]";
    return s;
  }
  void to(const torch::Device& d) override {
    for (auto& m : members_) m->to(d);
  }

 private:
  std::vector<std::unique_ptr<Teacher>> members_;
  double tau_;
};

}  // namespace

std::unique_ptr<Teacher> make_teacher(const TeacherSpec& spec, const DatasetMeta& meta) {
  // The teacher reads the student's views: model.image_size pixels square.
  const int64_t side = spec.view_side;
  if (!spec.torchscript.empty()) {
    DatasetMeta views = meta;
    views.height = views.width = side;
    return std::make_unique<TorchScriptTeacher>(spec.torchscript, views, spec.bf16);
  }
  // model.attention holds for every vitkd ViT of the run, the teacher's too.
  const AttentionKernel attention = attention_kernel(spec.attention, "the configuration");
  if (spec.checkpoints.size() == 1)
    return std::make_unique<CheckpointTeacher>(spec.checkpoints[0], meta, side, spec.bf16, attention);
  std::vector<std::unique_ptr<Teacher>> members;
  for (const std::string& path : spec.checkpoints)
    members.push_back(std::make_unique<CheckpointTeacher>(path, meta, side, spec.bf16, attention));
  return std::make_unique<EnsembleTeacher>(std::move(members), spec.temperature);
}

}  // namespace vitkd
