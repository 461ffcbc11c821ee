// The teacher-logit cache at one rank (sharing between ranks: test_mpi_teacher_cache.cpp).
#include <gtest/gtest.h>

#include <fstream>

#include "distill/teacher_cache.hpp"
#include "fixtures.hpp"

using namespace vitkd;
using vitkd::test::TempDir;

namespace {
torch::Tensor idx(std::vector<int64_t> v) { return torch::tensor(v, torch::kLong); }
// Logits of sample i: [i + 0.5, -i, i / 8] (exact in float).
torch::Tensor logits_of(const std::vector<int64_t>& rows) {
  auto t = torch::empty({static_cast<int64_t>(rows.size()), 3});
  for (size_t r = 0; r < rows.size(); ++r) {
    const float i = static_cast<float>(rows[r]);
    t[r][0] = i + 0.5f;
    t[r][1] = -i;
    t[r][2] = i / 8;
  }
  return t;
}
}  // namespace

TEST(TeacherCache, ServesABatchOnlyWhenEveryRowIsCached) {
  TeacherCache c(10, 3, "teacher A", "data.h5");
  EXPECT_FALSE(c.lookup(idx({1})).defined());
  c.share(idx({2, 5, 9}), logits_of({2, 5, 9}));
  EXPECT_EQ(c.filled(), 3);
  // In the order asked for, whatever the order they were stored in.
  auto got = c.lookup(idx({9, 2}));
  ASSERT_TRUE(got.defined());
  EXPECT_TRUE(torch::equal(got, logits_of({9, 2})));
  EXPECT_EQ(c.hits(), 2);
  // One missing row: no partial answer, and no hits counted.
  EXPECT_FALSE(c.lookup(idx({2, 3})).defined());
  EXPECT_FALSE(c.lookup(idx({-1})).defined());
  EXPECT_FALSE(c.lookup(idx({10})).defined());
  EXPECT_EQ(c.hits(), 2);
  // Storing a row again replaces it and does not count it twice; rows
  // outside the table are ignored; an empty or undefined share is fine.
  auto again = logits_of({5}) * 2;
  c.share(idx({5, 12}), torch::cat({again, logits_of({12})}));
  c.share(torch::Tensor(), torch::Tensor());
  c.share(idx({}), torch::empty({0, 3}));
  EXPECT_EQ(c.filled(), 3);
  EXPECT_TRUE(torch::equal(c.lookup(idx({5})), again));
  // bf16 logits (a teacher under autocast) are stored as float.
  c.share(idx({0}), logits_of({0}).to(torch::kBFloat16));
  EXPECT_EQ(c.lookup(idx({0})).scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(c.lookup(idx({0})), logits_of({0})));  // exact in bf16 too
}

TEST(TeacherCache, FileLoadsOnlyForTheSameTeacherAndDataset) {
  TempDir tmp;
  const std::string p = tmp / "teacher_logits.h5";
  TeacherCache empty(10, 3, "teacher A", "data.h5");
  EXPECT_FALSE(empty.save(p)) << "an empty cache wrote a file";
  EXPECT_NE(empty.load(p).find("starting empty"), std::string::npos);

  TeacherCache c(10, 3, "teacher A", "data.h5");
  c.share(idx({1, 4, 7}), logits_of({1, 4, 7}));
  ASSERT_TRUE(c.save(p));

  TeacherCache same(10, 3, "teacher A", "data.h5");
  EXPECT_EQ(same.load(p), "teacher cache: loaded 3 of 10 samples' logits from " + p);
  EXPECT_EQ(same.filled(), 3);
  EXPECT_TRUE(torch::equal(same.lookup(idx({7, 1, 4})), logits_of({7, 1, 4})));
  EXPECT_FALSE(same.lookup(idx({0})).defined());

  struct Other {
    int64_t n, k;
    const char* teacher;
    const char* data;
  };
  for (const Other& o : {Other{10, 3, "teacher B", "data.h5"}, Other{10, 3, "teacher A", "other.h5"},
                         Other{11, 3, "teacher A", "data.h5"}, Other{10, 4, "teacher A", "data.h5"}}) {
    TeacherCache x(o.n, o.k, o.teacher, o.data);
    EXPECT_NE(x.load(p).find("belongs to another teacher or dataset"), std::string::npos)
        << o.n << " " << o.k << " " << o.teacher << " " << o.data;
    EXPECT_EQ(x.filled(), 0);
    EXPECT_FALSE(x.lookup(idx({1})).defined());
  }

  // A damaged file is not used (and not an error: the cache starts empty).
  std::ofstream(p, std::ios::trunc) << "garbage";
  TeacherCache d(10, 3, "teacher A", "data.h5");
  EXPECT_NE(d.load(p).find("cannot use " + p), std::string::npos);
  EXPECT_EQ(d.filled(), 0);
  EXPECT_FALSE(d.lookup(idx({1})).defined());
}

// ---- the teacher itself (distill/teacher.hpp) ---------------------------------
#include <filesystem>

#include "config/config.hpp"
#include "data/dataset.hpp"
#include "distill/teacher.hpp"
#include "io/checkpoint.hpp"
#include "train/setup.hpp"
#include "util/torch_compat.hpp"

namespace {
// A tiny ViT with the weights of `seed`, saved as a vitkd checkpoint at `path`.
void save_tiny_teacher(const std::string& path, uint64_t seed) {
  const ModelSpec s = test::Spec::tiny();
  torch::manual_seed(seed);
  ViT m(s);
  CheckpointInfo info;
  info.spec = s;
  info.mode = "teacher";
  info.world_size = 1;
  info.test_top1 = 0.5;
  info.config = "[run]\n";
  save_checkpoint(path, m, info);
}
DatasetMeta tiny_meta() {
  DatasetMeta d;
  d.path = "tiny.h5";
  d.height = d.width = 8;
  d.channels = 1;
  d.num_classes = 4;
  d.class_names = {"a", "b", "c", "d"};
  d.mean = {0.5};
  d.std = {0.25};
  return d;
}
std::unique_ptr<Teacher> teacher_of(std::vector<std::string> paths, double tau = 4.0, bool bf16 = false) {
  Config cfg;
  cfg.run_mode = RunMode::Distill;
  cfg.teacher_checkpoint.paths = std::move(paths);
  cfg.distill_temperature = tau;
  cfg.model_image_size = tiny_meta().height;  // the student's views: the stored size
  return make_teacher(teacher_spec(cfg, bf16), tiny_meta());
}
}  // namespace

// A frozen vitkd teacher runs in inference mode on weights cast once: its
// logits are those of the checkpoint's model under autocast within rounding
// (fp32 and bf16), and come back as ordinary tensors a loss may save for
// backward.
TEST(Teacher, FrozenTeacherGivesAutocastsLogitsAsOrdinaryTensors) {
  TempDir tmp;
  const std::string a = tmp / "a.h5";
  save_tiny_teacher(a, 1);
  ViT ref(read_checkpoint_info(a).spec);
  load_checkpoint_weights(a, ref);
  ref->eval();
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({6, 1, 8, 8});
  for (bool bf16 : {false, true}) {
    if (bf16) VITKD_SKIP_WITHOUT_BF16_MATMUL();  // (after the fp32 checks)
    auto t = teacher_of({a}, 4.0, bf16);
    torch::Tensor want;
    {
      torch::NoGradGuard ng;
      AutocastBf16 ac(bf16);
      want = ref->forward(x).prediction().to(torch::kFloat32);
    }
    const torch::Tensor got = t->logits(x);
    EXPECT_FALSE(got.is_inference()) << "bf16 " << bf16;
    // Within rounding: the teacher folds the attention scale into its query
    // weights, bitwise only for power-of-two scales (this one is 8^-0.5).
    const double diff = (got - want).abs().max().item<double>(), scale = want.abs().max().item<double>();
    EXPECT_LE(diff, (bf16 ? 1e-2 : 1e-5) * scale) << "bf16 " << bf16;
    // As the distillation loss uses it: a target saved for the student's backward.
    const torch::Tensor s = torch::randn({6, 4}, torch::requires_grad());
    torch::nn::functional::kl_div(torch::log_softmax(s, 1), torch::softmax(got, 1),
                                  torch::nn::functional::KLDivFuncOptions().reduction(torch::kBatchMean))
        .backward();
    EXPECT_TRUE(s.grad().defined());
  }
}

// teacher.checkpoint = [a, b]: the soft targets (softmax at tau) are the mean
// of the members' own; the hard target is that mean's argmax.
TEST(Teacher, AnEnsembleIsTheMeanOfItsMembersProbabilitiesAtTau) {
  TempDir tmp;
  const std::string a = tmp / "a.h5", b = tmp / "b.h5";
  save_tiny_teacher(a, 1);
  save_tiny_teacher(b, 2);
  const double tau = 2.0;
  auto ta = teacher_of({a}, tau), tb = teacher_of({b}, tau), te = teacher_of({a, b}, tau);
  torch::manual_seed(9);
  const torch::Tensor x = torch::randn({6, 1, 8, 8});
  const torch::Tensor pa = torch::softmax(ta->logits(x).to(torch::kFloat64) / tau, 1);
  const torch::Tensor pb = torch::softmax(tb->logits(x).to(torch::kFloat64) / tau, 1);
  const torch::Tensor pe = torch::softmax(te->logits(x).to(torch::kFloat64) / tau, 1);
  ASSERT_GT((pa - pb).abs().max().item<double>(), 1e-3) << "the two members should differ";
  EXPECT_LE((pe - (pa + pb) / 2).abs().max().item<double>(), 1e-6);
  EXPECT_TRUE(torch::equal(pe.argmax(1), ((pa + pb) / 2).argmax(1)));
  EXPECT_EQ(te->parameters(), 2 * ta->parameters());
  EXPECT_EQ(te->forward_flops(), 2 * ta->forward_flops());
  EXPECT_NE(te->describe().find("ensemble of 2 teachers"), std::string::npos) << te->describe();
}

// Caches match a teacher by identity: a copy of its file elsewhere is the
// same teacher, other weights are another.
TEST(Teacher, IdentityIsTheModelAndItsWeightsNotThePath) {
  TempDir tmp;
  const std::string a = tmp / "a.h5", b = tmp / "b.h5", copy = tmp / "copy-of-a.h5";
  save_tiny_teacher(a, 1);
  save_tiny_teacher(b, 2);
  std::filesystem::copy_file(a, copy);
  EXPECT_EQ(teacher_of({copy})->identity(), teacher_of({a})->identity());
  EXPECT_NE(teacher_of({copy})->describe(), teacher_of({a})->describe());  // the log names the file
  EXPECT_NE(teacher_of({b})->identity(), teacher_of({a})->identity());
  EXPECT_NE(teacher_of({a, b})->identity(), teacher_of({a})->identity());
  EXPECT_EQ(teacher_of({a, b})->identity(), teacher_of({copy, b})->identity());
}
