#include <gtest/gtest.h>

#include <array>

#include <algorithm>
#include <map>

#include "config/config.hpp"
#include "model/vit.hpp"
#include "train/setup.hpp"
#include "util/error.hpp"

using namespace vitkd;

namespace {
std::string error_of(const std::string& toml, const std::vector<std::string>& ov = {}) {
  try {
    parse_config(toml, "test.toml", ov);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, DefaultsComeFromTheTable) {
  Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.run_mode, RunMode::Teacher);
  EXPECT_EQ(c.data_batch_size, 64);
  EXPECT_EQ(c.model_patch, 4);
  EXPECT_DOUBLE_EQ(c.distill_temperature, 4.0);
  EXPECT_EQ(c.precision_compute, Precision::Auto);
  // Every key appears in the key list with its default.
  bool found = false;
  for (const auto& k : config_keys())
    if (k.name == "optim.lr") found = k.def == "0.001";
  EXPECT_TRUE(found);
}

TEST(Config, FileValuesAndOverridesReachTheConfig) {
  Config c = parse_config("[model]\ndim = 96\nmlp_ratio = 2\n[data]\naugment = true\n", "t.toml",
                          {"model.depth=3", "run.out_dir=/tmp/x", "optim.lr=5e-4"});
  EXPECT_EQ(c.model_dim, 96);
  EXPECT_DOUBLE_EQ(c.model_mlp_ratio, 2.0);  // an integer is accepted for a float key
  EXPECT_TRUE(c.data_augment);
  EXPECT_EQ(c.model_depth, 3);
  EXPECT_EQ(c.run_out_dir, "/tmp/x");
  EXPECT_DOUBLE_EQ(c.optim_lr, 5e-4);
}

TEST(Config, UnknownKeySuggestsTheNearest) {
  auto e = error_of("[optim]\nlearning_rate = 1e-3\n");
  EXPECT_NE(e.find("unknown configuration key 'optim.learning_rate'"), std::string::npos) << e;
  e = error_of("[model]\ndepht = 3\n");
  EXPECT_NE(e.find("did you mean 'model.depth'"), std::string::npos) << e;
  e = error_of("", {"trian.epochs=3"});
  EXPECT_NE(e.find("did you mean 'train.epochs'"), std::string::npos) << e;
}

TEST(Config, WrongTypeNamesKeyAndType) {
  auto e = error_of("[data]\nbatch_size = \"64\"\n");
  EXPECT_NE(e.find("'data.batch_size' must be an integer"), std::string::npos) << e;
  EXPECT_NE(e.find("test.toml"), std::string::npos) << e;
}

TEST(Config, InvalidValuesNameKeyAndFix) {
  EXPECT_NE(error_of("[data]\nbatch_size = 0\n").find("data.batch_size"), std::string::npos);
  EXPECT_NE(error_of("[model]\ndepth = 0\n").find("model.depth"), std::string::npos);
  EXPECT_NE(error_of("[model]\ndim = 100\nheads = 3\n").find("do not divide dim"), std::string::npos);
  EXPECT_NE(error_of("[model]\nimage_size = 28\npatch = 5\n").find("does not divide image_size"),
            std::string::npos);
  EXPECT_NE(error_of("[run]\nmode = \"distil\"\n").find("did you mean 'distill'"), std::string::npos);
  EXPECT_NE(error_of("[run]\nmode = \"distill\"\n").find("teacher.checkpoint"), std::string::npos);
  EXPECT_NE(error_of("[run]\nmode = \"distill\"\n").find("teacher.torchscript"), std::string::npos);
  const auto both = error_of("[run]\nmode = \"distill\"\n[teacher]\ncheckpoint = \"a.h5\"\ntorchscript = \"b.pt\"\n");
  EXPECT_NE(both.find("both teacher.checkpoint and teacher.torchscript"), std::string::npos) << both;
  EXPECT_NE(error_of("[distill]\nalpha = 1.5\n").find("distill.alpha"), std::string::npos);
}

TEST(Config, SiftPassInTheTrainingForwardServesScopeSampleOnly) {
  EXPECT_EQ(parse_config("", "t.toml").sift_pass, SiftPass::Separate);
  EXPECT_EQ(error_of("", {"sift.enabled=true", "sift.pass=\"in_forward\""}), "");
  const std::string e = error_of("", {"run.mode=\"distill\"", "sift.enabled=true", "sift.scope=\"teacher\"",
                                      "sift.pass=\"in_forward\""});
  EXPECT_NE(e.find("invalid value for 'sift.pass'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Config, ProfileKeysAreOffByDefaultAndCheckedInOneLine) {
  const Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.train_profile_steps, 0);  // off
  EXPECT_EQ(c.train_profile_from_step, 5);
  EXPECT_EQ(parse_config("", "t.toml", {"train.profile_steps=2", "train.profile_from_step=1"}).train_profile_steps, 2);
  auto e = error_of("", {"train.profile_steps=-1"});
  EXPECT_NE(e.find("test.toml: invalid value for 'train.profile_steps': must be >= 0 (0 = off), got -1"),
            std::string::npos) << e;
  e = error_of("[train]\nprofile_from_step = 0\n");
  EXPECT_NE(e.find("invalid value for 'train.profile_from_step': must be at least 1"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Config, SyntaxErrorNamesFileAndLine) {
  auto e = error_of("[model]\ndim = = 3\n");
  EXPECT_NE(e.find("test.toml:2"), std::string::npos) << e;
}

TEST(Config, EchoParsesBackToTheSameConfig) {
  Config c = parse_config("[model]\ndim = 48\n[run]\nout_dir = \"a b/c\"\n", "t.toml");
  Config d = parse_config(config_to_toml(c), "echo.toml");
  EXPECT_EQ(config_to_toml(c), config_to_toml(d));
  EXPECT_EQ(d.model_dim, 48);
  EXPECT_EQ(d.run_out_dir, "a b/c");
}

// Every word of every choice (config/choices.cpp) parses to its value and
// echoes as itself; a word of no value is one line listing the choice's words.
template <class E> void expect_words_round_trip(const char* key, E Config::*field) {
  for (const std::string& w : choice_words<E>()) {
    // (a teacher named and augmentation on, which distill mode and a policy need)
    const Config c =
        parse_config("", "t.toml", {"teacher.checkpoint=t.h5", "data.augment=true", std::string(key) + "=" + w});
    EXPECT_EQ(choice_name(c.*field), w) << key;
    EXPECT_NE(config_to_toml(c).find(std::string(key).substr(std::string(key).find('.') + 1) + " = \"" + w + "\""),
              std::string::npos) << key << " = " << w;
  }
  const std::string e = error_of("", {std::string(key) + "=no_such_word"});
  EXPECT_NE(e.find(std::string("invalid value for '") + key + "': \"no_such_word\" is not one of " +
                   choice_list<E>()), std::string::npos) << e;
}

TEST(Config, EveryChoiceWordParsesAndEchoesAsItself) {
  expect_words_round_trip("run.mode", &Config::run_mode);
  expect_words_round_trip("run.device", &Config::run_device);
  expect_words_round_trip("data.crop", &Config::data_crop);
  expect_words_round_trip("data.policy", &Config::data_policy);
  expect_words_round_trip("data.transfer", &Config::data_transfer);
  expect_words_round_trip("data.eval_split", &Config::data_eval_split);
  expect_words_round_trip("data.io", &Config::data_io);
  expect_words_round_trip("model.init", &Config::model_init);
  expect_words_round_trip("model.decay", &Config::model_decay);
  expect_words_round_trip("model.attention", &Config::model_attention);
  expect_words_round_trip("distill.kind", &Config::distill_kind);
  expect_words_round_trip("sift.criterion", &Config::sift_criterion);
  expect_words_round_trip("sift.scope", &Config::sift_scope);
  expect_words_round_trip("sift.pass", &Config::sift_pass);
  expect_words_round_trip("dist.backend", &Config::dist_backend);
  expect_words_round_trip("dist.sharding", &Config::dist_sharding);
  expect_words_round_trip("precision.compute", &Config::precision_compute);
  expect_words_round_trip("precision.reduce", &Config::precision_reduce);
  // A value vitkd resolves to but never reads from a configuration.
  EXPECT_NE(error_of("", {"dist.backend=local"}).find("is not one of \"auto\", \"mpi\", \"nccl\""),
            std::string::npos);
  // checkpoint.resume: its words, or any other string as a path.
  EXPECT_EQ(parse_config("", "t.toml", {"checkpoint.resume=never"}).checkpoint_resume.kind, ResumeKind::Never);
  const Config p = parse_config("", "t.toml", {"checkpoint.resume=runs/a/checkpoint.h5"});
  EXPECT_EQ(p.checkpoint_resume.kind, ResumeKind::Path);
  EXPECT_EQ(p.checkpoint_resume.path, "runs/a/checkpoint.h5");
  EXPECT_NE(config_to_toml(p).find("resume = \"runs/a/checkpoint.h5\""), std::string::npos);
}

TEST(Config, NonUtf8BareWordOverrideIsRefused) {
  // Found by fuzz_config: a non-UTF-8 bare word made an echo that does not parse back.
  auto e = error_of("", {"run.out_dir=caf\xe9"});
  EXPECT_NE(e.find("not valid UTF-8"), std::string::npos) << e;
  Config c = parse_config("", "t.toml", {"run.out_dir=r\xc3\xa9sultats dir"});
  Config d = parse_config(config_to_toml(c), "echo.toml");
  EXPECT_EQ(d.run_out_dir, "r\xc3\xa9sultats dir");
}

TEST(Config, SectionWrittenAsAValueIsRefusedWithTheFix) {
  auto e = error_of("[[model]]\ndim = 3\n");
  EXPECT_NE(e.find("top-level key 'model' must be a [section], got an array; write it as [model]"),
            std::string::npos) << e;
  e = error_of("optim = 3\n");
  EXPECT_NE(e.find("write it as [optim]"), std::string::npos) << e;
}

TEST(Config, EchoKeepsEveryCharacterOfStrings) {
  // Found by fuzz_config: a value starting with a newline lost it in the echo.
  Config c = parse_config("[run]\nout_dir = \"q\\\"b\\\\s\\u0001\\t\"\n", "t.toml", {"data.path=\nx y"});
  ASSERT_EQ(c.data_path, "\nx y");
  Config d = parse_config(config_to_toml(c), "echo.toml");
  EXPECT_EQ(d.data_path, "\nx y");
  EXPECT_EQ(d.run_out_dir, "q\"b\\s\x01\t");
  EXPECT_EQ(config_to_toml(c), config_to_toml(d));
}

TEST(Config, AccuracyThresholdsAreAListOfFractions) {
  Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.train_accuracy_thresholds, (std::vector<double>{0.85, 0.87, 0.88, 0.89, 0.90}));
  EXPECT_EQ(c.train_eval_every_steps, 0);
  c = parse_config("[train]\naccuracy_thresholds = [0.5, 1]\neval_every_steps = 20\n", "t.toml");
  EXPECT_EQ(c.train_accuracy_thresholds, (std::vector<double>{0.5, 1.0}));  // an integer is a float
  EXPECT_EQ(c.train_eval_every_steps, 20);
  c = parse_config("", "t.toml", {"train.accuracy_thresholds=[0.7,0.75]"});
  EXPECT_EQ(c.train_accuracy_thresholds, (std::vector<double>{0.7, 0.75}));
  c = parse_config("", "t.toml", {"train.accuracy_thresholds=[]"});
  EXPECT_TRUE(c.train_accuracy_thresholds.empty());
  // The echo parses back to the same list.
  const Config d = parse_config("", "t.toml", {"train.accuracy_thresholds=[0.1, 0.30000000000000004]"});
  EXPECT_EQ(parse_config(config_to_toml(d), "echo.toml").train_accuracy_thresholds,
            d.train_accuracy_thresholds);

  for (const char* bad : {"[0.9, 1.5]", "[0]", "[-0.2]", "[nan]"}) {
    const auto e = error_of("", {std::string("train.accuracy_thresholds=") + bad});
    EXPECT_NE(e.find("invalid value for 'train.accuracy_thresholds'"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("(0, 1]"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  for (const char* bad : {"0.9", "[\"a\"]", "[[0.5]]"}) {
    const auto e = error_of("", {std::string("train.accuracy_thresholds=") + bad});
    EXPECT_NE(e.find("'train.accuracy_thresholds' must be an array of floats"), std::string::npos)
        << bad << ": " << e;
  }
  EXPECT_NE(error_of("[train]\neval_every_steps = -1\n").find("train.eval_every_steps"), std::string::npos);
}

// precision.reduce = "bf16" is the sharded reduce-scatter's wire type; the
// unsharded allreduce is fp32, so the pair is one clear error, not ignored.
TEST(Config, Bf16ReduceWithoutShardingIsRefusedWithTheFix) {
  const std::string e = error_of("", {"precision.reduce=bf16", "dist.sharding=none"});
  EXPECT_NE(e.find("precision.reduce"), std::string::npos) << e;
  EXPECT_NE(e.find("dist.sharding = \"zero1\""), std::string::npos) << e;
  EXPECT_NE(e.find("precision.reduce = \"fp32\""), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(error_of("", {"precision.reduce=bf16", "dist.sharding=zero1"}), "");
  EXPECT_EQ(error_of("", {"precision.reduce=fp32", "dist.sharding=none"}), "");
}

// teacher.checkpoint: one path (a string, as before) or an ensemble (an
// array of paths); the echo gives back the same list.
TEST(Config, TeacherCheckpointIsOnePathOrAList) {
  Config c = parse_config("", "t.toml");
  EXPECT_TRUE(c.teacher_checkpoint.empty());
  c = parse_config("", "t.toml", {"teacher.checkpoint=runs/t/checkpoint.h5"});
  EXPECT_EQ(c.teacher_checkpoint.paths, (std::vector<std::string>{"runs/t/checkpoint.h5"}));
  EXPECT_NE(config_to_toml(c).find("checkpoint = \"runs/t/checkpoint.h5\""), std::string::npos);
  c = parse_config("[teacher]\ncheckpoint = [\"a.h5\", \"b.h5\", \"c.h5\"]\n", "t.toml");
  EXPECT_EQ(c.teacher_checkpoint.paths, (std::vector<std::string>{"a.h5", "b.h5", "c.h5"}));
  EXPECT_EQ(parse_config(config_to_toml(c), "echo.toml").teacher_checkpoint.paths, c.teacher_checkpoint.paths);
  c = parse_config("", "t.toml", {"teacher.checkpoint=[\"x.h5\",\"y.h5\"]"});
  EXPECT_EQ(c.teacher_checkpoint.size(), 2u);
  for (const char* bad : {"[1, 2]", "[\"a.h5\", \"\"]", "3"}) {
    const auto e = error_of("", {std::string("teacher.checkpoint=") + bad});
    EXPECT_NE(e.find("'teacher.checkpoint' must be a string or array of strings"), std::string::npos)
        << bad << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// A lowered optim.lr below the default min_lr: the line names both values and the fix.
TEST(Config, MinLrAboveALoweredLrNamesBoth) {
  const std::string e = error_of("", {"optim.lr=1e-12"});
  EXPECT_NE(e.find("optim.min_lr"), std::string::npos) << e;
  EXPECT_NE(e.find("optim.lr is 1e-12"), std::string::npos) << e;
  EXPECT_NE(e.find("optim.min_lr = 0"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

// ---- model.preset: timm's ViT shapes -------------------------------------------

TEST(ModelPreset, PresetsHaveTimmsParameterCounts) {
  // timm 1.0's parameter counts at 1000 classes (sum of numel over
  // timm.create_model(name).parameters()): ViT-Ti/16, -S/16, -B/16, -L/16.
  const std::map<std::string, int64_t> timm = {{"vit_ti16", 5717416},
                                               {"vit_s16", 22050664},
                                               {"vit_b16", 86567656},
                                               {"vit_l16", 304326632}};
  ASSERT_EQ(model_presets().size(), timm.size());
  for (const ModelPreset& p : model_presets()) {
    const Config c = parse_config("[model]\npreset = \"" + std::string(p.name) + "\"\nclasses = 1000\n", "t.toml");
    const ModelSpec s = spec_from_config(c);
    EXPECT_EQ(s.parameter_count(), timm.at(p.name)) << p.name;
    EXPECT_EQ(s.image_size, 224) << p.name;
    EXPECT_EQ(s.channels, 3) << p.name;
    EXPECT_EQ(s.patch, 16) << p.name;
    EXPECT_EQ(s.mlp_ratio, 4.0) << p.name;
    EXPECT_EQ(s.norm_eps, 1e-6) << p.name;
    // The key's help lists every preset (it is the generated reference page).
    const auto& keys = config_keys();
    const auto key = std::find_if(keys.begin(), keys.end(), [](const ConfigKeyInfo& k) { return k.name == "model.preset"; });
    ASSERT_NE(key, keys.end());
    std::string quoted = "\"";  // (built in steps: GCC 12 -O3 warns falsely on "\"" + std::string(...))
    quoted += p.name;
    quoted += '"';
    EXPECT_NE(key->help.find(quoted), std::string::npos) << p.name;
  }
}

TEST(ModelPreset, KeysSetBesideThePresetOverrideIt) {
  const Config c = parse_config("[model]\npreset = \"vit_s16\"\ndepth = 6\n", "t.toml", {"model.image_size=96"});
  EXPECT_EQ(c.model_dim, 384);
  EXPECT_EQ(c.model_heads, 6);
  EXPECT_EQ(c.model_depth, 6);
  EXPECT_EQ(c.model_image_size, 96);
  EXPECT_EQ(c.model_patch, 16);
  // The echo names the preset and the resolved keys, and parses back alike.
  const Config back = parse_config(config_to_toml(c), "echo.toml");
  EXPECT_EQ(config_to_toml(back), config_to_toml(c));
  // No preset: the table's defaults, as before.
  EXPECT_EQ(parse_config("", "t.toml").model_dim, 192);
}

// timm's shapes themselves (timm's vision_transformer.py: embed_dim, depth,
// num_heads of vit_tiny/small/base/large_patch16_224): the head count does not
// change the parameter count, so it is checked here.
TEST(ModelPreset, PresetsHaveTimmsShapes) {
  const std::map<std::string, std::array<int64_t, 3>> timm = {
      {"vit_ti16", {192, 12, 3}}, {"vit_s16", {384, 12, 6}}, {"vit_b16", {768, 12, 12}}, {"vit_l16", {1024, 24, 16}}};
  ASSERT_EQ(model_presets().size(), timm.size());
  for (const ModelPreset& p : model_presets()) {
    const Config c = parse_config("[model]\npreset = \"" + std::string(p.name) + "\"\n", "t.toml");
    EXPECT_EQ((std::array<int64_t, 3>{c.model_dim, c.model_depth, c.model_heads}), timm.at(p.name)) << p.name;
  }
}

// The sources in order, file < command line; within one source a shape key
// beats the preset. The echo's "model keys" line says where keys came from.
TEST(ModelPreset, APresetOnTheCommandLineBeatsTheFilesShape) {
  const std::string file = "[model]\nimage_size = 28\nchannels = 1\npatch = 4\ndim = 192\ndepth = 6\nheads = 3\n";
  // The command line's preset over the file's shape: vit_s16 whole.
  Config c = parse_config(file, "f.toml", {"model.preset=vit_s16", "model.classes=1000"});
  EXPECT_EQ(spec_from_config(c).parameter_count(), 22050664);
  EXPECT_EQ((std::array<int64_t, 6>{c.model_image_size, c.model_channels, c.model_patch, c.model_dim, c.model_depth,
                                    c.model_heads}),
            (std::array<int64_t, 6>{224, 3, 16, 384, 12, 6}));
  EXPECT_NE(c.model_sources.find("model.preset \"vit_s16\" (command line) over f.toml's image_size, channels, "
                                 "patch, dim, depth, heads"),
            std::string::npos)
      << c.model_sources;
  // A shape key on the command line beats the preset there.
  c = parse_config(file, "f.toml", {"model.preset=vit_s16", "model.depth=4"});
  EXPECT_EQ(c.model_depth, 4);
  EXPECT_EQ(c.model_dim, 384);
  EXPECT_NE(c.model_sources.find("depth from the command line"), std::string::npos) << c.model_sources;
  // The file's preset under the command line's key.
  c = parse_config("[model]\npreset = \"vit_b16\"\n", "f.toml", {"model.heads=16"});
  EXPECT_EQ(c.model_heads, 16);
  EXPECT_EQ(c.model_dim, 768);
  // The file's preset and the file's key: the key.
  c = parse_config("[model]\npreset = \"vit_b16\"\ndepth = 6\n", "f.toml");
  EXPECT_EQ(c.model_depth, 6);
  EXPECT_NE(c.model_sources.find("depth from f.toml"), std::string::npos) << c.model_sources;
  // One source alone: nothing to say.
  EXPECT_EQ(parse_config("[model]\npreset = \"vit_b16\"\n", "f.toml").model_sources, "");
  EXPECT_EQ(parse_config(file, "f.toml", {"model.depth=2"}).model_sources, "");
  // The echo parses back to the same model (it names every key in one source).
  const Config back = parse_config(config_to_toml(c), "echo.toml");
  EXPECT_EQ(config_to_toml(back), config_to_toml(c));
  // A preset and a key on the command line that do not fit: one line.
  const std::string e = error_of(file, {"model.preset=vit_s16", "model.heads=5"});
  EXPECT_NE(e.find("model.heads"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(ModelPreset, BadPresetsAreOneLine) {
  const std::string unknown = error_of("[model]\npreset = \"vit_s32\"\n");
  EXPECT_NE(unknown.find("model.preset"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("\"vit_ti16\", \"vit_s16\", \"vit_b16\", \"vit_l16\""), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos) << unknown;
  // A key beside the preset that contradicts it: the usual one line.
  const std::string heads = error_of("[model]\npreset = \"vit_s16\"\nheads = 5\n");
  EXPECT_NE(heads.find("model.heads"), std::string::npos) << heads;
  EXPECT_NE(error_of("[model]\npreset = 16\n").find("model.preset' must be a string"), std::string::npos);
}
