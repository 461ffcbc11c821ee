#include "config/choices.hpp"

#include <utility>

namespace vitkd {
namespace {

// One row per value: the value, its word, and whether a configuration may
// write it. The words are the configuration keys' values (docs/configuration.md).
template <class E> struct Row {
  E value;
  const char* word;
  bool configurable = true;
};
template <class E> const std::vector<Row<E>>& rows();

#define VITKD_ROWS(E, ...) \
  template <> const std::vector<Row<E>>& rows<E>() { static const std::vector<Row<E>> r{__VA_ARGS__}; return r; }

VITKD_ROWS(RunMode, {RunMode::Teacher, "teacher"}, {RunMode::Distill, "distill"})
VITKD_ROWS(DeviceKind, {DeviceKind::Auto, "auto"}, {DeviceKind::Cpu, "cpu"}, {DeviceKind::Cuda, "cuda"})
VITKD_ROWS(CropKind, {CropKind::Pad, "pad"}, {CropKind::RandomResized, "random_resized"})
VITKD_ROWS(Policy, {Policy::None, "none"}, {Policy::TrivialAugment, "trivial_augment"})
VITKD_ROWS(InputTransfer, {InputTransfer::Auto, "auto"}, {InputTransfer::Float32, "float32"},
           {InputTransfer::Uint8, "uint8"})
VITKD_ROWS(EvalSplit, {EvalSplit::Test, "test"}, {EvalSplit::Val, "val"})
VITKD_ROWS(SampleIo, {SampleIo::Serial, "serial"}, {SampleIo::Mpio, "mpio"})
VITKD_ROWS(InitScheme, {InitScheme::TruncNormal, "trunc_normal"}, {InitScheme::Torch, "torch"})
VITKD_ROWS(DecayScope, {DecayScope::Matrices, "matrices"}, {DecayScope::All, "all"})
VITKD_ROWS(AttentionKernel, {AttentionKernel::Auto, "auto"}, {AttentionKernel::Fused, "fused"},
           {AttentionKernel::Unfused, "unfused"})
VITKD_ROWS(DistillKind, {DistillKind::Soft, "soft"}, {DistillKind::Hard, "hard"})
VITKD_ROWS(SiftCriterion, {SiftCriterion::CrossEntropy, "ce"}, {SiftCriterion::Distillation, "kd"})
VITKD_ROWS(SiftScope, {SiftScope::Sample, "sample"}, {SiftScope::Teacher, "teacher"})
VITKD_ROWS(SiftPass, {SiftPass::Separate, "separate"}, {SiftPass::InForward, "in_forward"})
VITKD_ROWS(Backend, {Backend::Auto, "auto"}, {Backend::Mpi, "mpi"}, {Backend::Nccl, "nccl"},
           {Backend::Local, "local", false})
VITKD_ROWS(Sharding, {Sharding::Zero1, "zero1"}, {Sharding::None, "none"})
VITKD_ROWS(Precision, {Precision::Auto, "auto"}, {Precision::Bf16, "bf16"}, {Precision::Fp32, "fp32"})
VITKD_ROWS(ResumeKind, {ResumeKind::Auto, "auto"}, {ResumeKind::Never, "never"}, {ResumeKind::Path, "PATH", false})
#undef VITKD_ROWS

}  // namespace

template <class E> const char* choice_name(E v) {
  for (const auto& r : rows<E>())
    if (r.value == v) return r.word;
  return "?";  // unreachable: every value has a row
}

template <class E> std::optional<E> parse_choice(const std::string& word) {
  for (const auto& r : rows<E>())
    if (r.configurable && word == r.word) return r.value;
  return std::nullopt;
}

template <class E> std::vector<std::string> choice_words() {
  std::vector<std::string> w;
  for (const auto& r : rows<E>())
    if (r.configurable) w.push_back(r.word);
  return w;
}

template <class E> std::string choice_list() {
  std::string s;
  for (const auto& w : choice_words<E>()) s += (s.empty() ? "\"" : ", \"") + w + "\"";
  return s;
}

#define VITKD_INSTANTIATE(E)                                            \
  template const char* choice_name<E>(E);                               \
  template std::optional<E> parse_choice<E>(const std::string&);        \
  template std::vector<std::string> choice_words<E>();                  \
  template std::string choice_list<E>();
VITKD_CHOICE_TYPES(VITKD_INSTANTIATE)
#undef VITKD_INSTANTIATE

}  // namespace vitkd
