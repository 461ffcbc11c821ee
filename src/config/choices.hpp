#pragma once
// The configuration's choices: every option whose value is one of a few words
// is an enum here, and its words are written once, in choices.cpp's tables.
// The parser, the configuration echo, result.json, checkpoints and messages
// name a value through choice_name(); no other file spells a choice's word.
// A value is parsed once, at the configuration's edge (config.cpp); the
// layers below take these enums, never the words.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vitkd {

enum class RunMode : uint8_t { Teacher, Distill };                  ///< run.mode
enum class DeviceKind : uint8_t { Auto, Cpu, Cuda };                ///< run.device (resolved: Cpu | Cuda)
enum class CropKind : uint8_t { Pad, RandomResized };               ///< data.crop
enum class Policy : uint8_t { None, TrivialAugment };               ///< data.policy
enum class InputTransfer : uint8_t { Auto, Float32, Uint8 };        ///< data.transfer (resolved: Float32 | Uint8)
enum class EvalSplit : uint8_t { Test, Val };                       ///< data.eval_split
enum class SampleIo : uint8_t { Serial, Mpio };                     ///< data.io
enum class InitScheme : uint8_t { TruncNormal, Torch };             ///< model.init
enum class DecayScope : uint8_t { Matrices, All };                  ///< model.decay
enum class AttentionKernel : uint8_t { Auto, Unfused, Fused };      ///< model.attention (as run: Unfused | Fused)
enum class DistillKind : uint8_t { Soft, Hard };                    ///< distill.kind
enum class SiftCriterion : uint8_t { CrossEntropy, Distillation };  ///< sift.criterion
enum class SiftScope : uint8_t { Sample, Teacher };                 ///< sift.scope
enum class SiftPass : uint8_t { Separate, InForward };              ///< sift.pass
/// dist.backend; Local (nothing to reduce at one rank) is what "auto" or
/// "mpi" resolve to at one rank, never a configured value.
enum class Backend : uint8_t { Auto, Mpi, Nccl, Local };
enum class Sharding : uint8_t { Zero1, None };                      ///< dist.sharding
enum class Precision : uint8_t { Auto, Bf16, Fp32 };                ///< precision.compute / .reduce (resolved: Bf16 | Fp32)
enum class ResumeKind : uint8_t { Auto, Never, Path };              ///< checkpoint.resume

/// checkpoint.resume: "auto", "never" or the path of a checkpoint.
struct ResumeFrom {
  ResumeKind kind = ResumeKind::Auto;
  std::string path;  ///< kind == Path only
  bool operator==(const ResumeFrom& o) const { return kind == o.kind && path == o.path; }
  bool operator!=(const ResumeFrom& o) const { return !(*this == o); }
};

// Every choice type, for the explicit instantiations in choices.cpp.
#define VITKD_CHOICE_TYPES(X)                                                                      \
  X(RunMode) X(DeviceKind) X(CropKind) X(Policy) X(InputTransfer) X(EvalSplit) X(SampleIo)          \
  X(InitScheme) X(DecayScope) X(AttentionKernel) X(DistillKind) X(SiftCriterion) X(SiftScope)       \
  X(SiftPass)                                                                                       \
  X(Backend) X(Sharding) X(Precision) X(ResumeKind)

template <class E> struct is_choice { static constexpr bool value = false; };
#define VITKD_IS_CHOICE(E) \
  template <> struct is_choice<E> { static constexpr bool value = true; };
VITKD_CHOICE_TYPES(VITKD_IS_CHOICE)
#undef VITKD_IS_CHOICE

/// The word of `v`, e.g. choice_name(CropKind::RandomResized) == "random_resized".
template <class E> const char* choice_name(E v);
/// The value a configuration word names; nullopt for any other word (and for
/// the words of values that are never configured, such as Backend::Local).
template <class E> std::optional<E> parse_choice(const std::string& word);
/// The words a configuration may write, in the table's order.
template <class E> std::vector<std::string> choice_words();
/// Those words quoted and joined: "\"pad\", \"random_resized\"".
template <class E> std::string choice_list();
/// `key = "word"`, as a message names a setting: e.g.
/// setting_text("data.crop", CropKind::RandomResized) == "data.crop = \"random_resized\"".
template <class E> std::string setting_text(const char* key, E v) {
  return std::string(key) + " = \"" + choice_name(v) + "\"";
}

}  // namespace vitkd
