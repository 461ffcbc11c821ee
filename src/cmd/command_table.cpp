// The command table: every command, its arguments, flags and help, from
// which parsing (args.cpp), `vitkd help` and docs/commands.md come.
#include "cmd/args.hpp"
#include "cmd/commands.hpp"
#include "config/choices.hpp"
#include "config/config.hpp"
#include "data/dataset.hpp"
#include "data/image_folder.hpp"

namespace vitkd {
namespace cli {
namespace {

// `prepare fashion-mnist`, `prepare synthetic` and `prepare folder`: the validation split (data/validation.hpp).
Flag val_fraction_flag() {
  return Flag::number("val-fraction", "F",
                      "also write a validation split: round(F * n) of each class's n training samples, "
                      "F in (0, 0.5], moved out of the training split (default: none)");
}
Flag val_seed_flag() {
  return Flag::count("val-seed", "N", "seed of the validation split's choice of samples").default_to("1");
}

// `bench loader --crop`: data.crop's words and the evaluation view.
std::vector<std::string> with_evaluation_view(std::vector<std::string> crops) {
  crops.push_back(kEvaluationView);
  return crops;
}

// `bench attention --model`: model.preset's words.
std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) names.emplace_back(p.name);
  return names;
}

// The `vitkd bench ...` commands, in the order `vitkd bench --help` lists them.
void add_bench_commands(std::vector<Command>& c) {
  c.push_back({"bench gemm", "Measure matrix-product rates (bf16, fp32) at the models' shapes.",
               {},
               {Flag::count("threads", "T", "compute threads").at_least(1).default_to("1"),
                Flag::text("device", "D", "where to measure, as run.device").one_of(choice_words<DeviceKind>())
                    .default_to(choice_name(DeviceKind::Cpu)),
                Flag::count("millis", "MS", "measuring time per shape and type").at_least(1).default_to("1000"),
                Flag::path("out", "FILE.json", "also write the per-core rates (for train.mfu_ceiling) as JSON"),
                Flag::on_off("auto-only", "only say what precision.compute = \"auto\" chooses here (the run's "
                             "0.2 s probe; no shapes timed: seconds, not minutes, where bf16 is emulated)")}});
  c.push_back({"bench ops", "Measure GELU and the bf16 attention softmax: torch against vitkd's kernels.",
               {},
               {Flag::count("threads", "T", "compute threads").at_least(1).default_to("1"),
                Flag::count("millis", "MS", "measuring time per operation").at_least(1).default_to("500")},
               "GELU forward and backward, fp32 and bf16, at the models' MLP shapes, against torch::gelu; "
               "the softmax of bf16 attention scores at ViT-B/16's shape (batch 16), forward and forward + "
               "backward, against LibTorch's under autocast."});
  c.push_back({"bench attention",
               "Time attention at a ViT's shapes: fused kernel against bmm-softmax-bmm.",
               {},
               {Flag::count("threads", "T", "compute threads").at_least(1).default_to("1"),
                Flag::text("model", "PRESET", "the shapes, as model.preset").one_of(preset_names()).default_to("vit_s16"),
                Flag::count("batch", "B", "samples of 197 tokens").at_least(1).default_to("16"),
                Flag::count("rounds", "R", "alternating rounds; the medians are printed").at_least(1).default_to("3"),
                Flag::count("millis", "MS", "measuring time per kernel and round").at_least(1).default_to("1000"),
                Flag::path("out", "FILE.json", "also write the medians as JSON")},
               "At 224x224 (197 tokens; vit_s16: 384 wide, 6 heads of 64): the attention module (qkv, "
               "attention, projection) and a whole block, forward + backward under bf16 autocast (where "
               "LibTorch multiplies bf16) and in fp32, then in bf16 the forward pass alone as a frozen teacher "
               "runs it (inference mode, bf16 weights), with each model.attention kernel in turn. A LibTorch "
               "without the fused kernel (before 2.1) times the unfused one only."});
  c.push_back({"bench adamw",
               "Check the AdamW update of a device against the host kernel, and time both.",
               {},
               {Flag::count("elements", "N", "shard length (default: the teacher's parameter count)")
                    .at_least(1).default_to("2684576"),
                Flag::count("steps", "K", "update steps compared").at_least(1).default_to("20"),
                Flag::text("device", "D", "where the device update runs, as run.device").one_of(choice_words<DeviceKind>())
                    .default_to(choice_name(DeviceKind::Auto)),
                Flag::text("kernel", "K", "the device update: auto (Kokkos's device kernel on a GPU where "
                           "Kokkos has CUDA, else LibTorch's), tensor (LibTorch's element-wise kernels), "
                           "kokkos-device").one_of({"auto", "tensor", "kokkos-device"}).default_to("auto"),
                Flag::path("out", "FILE.json", "also write the result as JSON")},
               "Both updates start from the same parameters and see the same gradients, clipping scales and "
               "decay mask; the device's squared gradient norm is compared too. Prints the relative L2 "
               "difference of the parameters and moments after the last step and the worst relative "
               "difference of the norms (the check: all at most 1e-6) and exits 1 when one is larger. On the "
               "CPU the device update is LibTorch's element-wise kernels, which is what runs on a GPU where "
               "Kokkos has no CUDA."});
  c.push_back({"bench loader", "Measure the loader's images per second per core: reads and the training transform.",
               {},
               {Flag::path("data", "FILE.h5", "a vitkd dataset (e.g. photos stored at 256 for 224)").needed(),
                Flag::count("image-size", "S", "the model's input side (model.image_size)").at_least(1)
                    .default_to("224"),
                Flag::text("crop", "K", "the training crop: random_resized, pad (as data.crop) or none "
                           "(the evaluation view)").one_of(with_evaluation_view(choice_words<CropKind>()))
                    .default_to(choice_name(CropKind::RandomResized)),
                Flag::text("policy", "P", "the augmentation policy, as data.policy").one_of(choice_words<Policy>())
                    .default_to(choice_name(Policy::None)),
                Flag::number("mixup", "A", "Mixup's alpha, as data.mixup (0 = off)").default_to("0"),
                Flag::number("cutmix", "A", "CutMix's alpha, as data.cutmix (0 = off)").default_to("0"),
                Flag::number("random-erase", "P", "random erasing's probability, as data.random_erase")
                    .default_to("0"),
                Flag::count("batch", "N", "samples per rank per batch").at_least(1).default_to("64"),
                Flag::count("millis", "MS", "measuring time").at_least(1).default_to("5000"),
                Flag::number("model-rate", "R", "the training rate to compare with, images/s over all ranks "
                             "(0 = none)").default_to("0"),
                Flag::path("out", "FILE.json", "also write the rates as JSON")},
               "One thread per rank reads random batches (sorted, coalesced hyperslabs, as the loader; a file "
               "prepared with --store jpeg is decoded too, and \"read\" counts the decoding) and "
               "transforms them (views, bilinear resampling, flip, the policy, normalization, erasing; with Mixup or CutMix "
               "also each sample's partner, read and mixed in), with a horizontal flip of probability 1/2; run "
               "under mpirun -n K for K cores. The file is dropped from the page cache "
               "first where the kernel allows it."});
  c.push_back({"bench comm", "Measure reduce-scatter, all-gather and allreduce rates (run under mpirun).",
               {},
               {Flag::count("elements", "N", "floats per operation (default: the teacher's parameter count)")
                    .at_least(1).at_most(2147483647).default_to("2684576"),
                Flag::count("iters", "K", "repetitions per operation").at_least(1).default_to("20")},
               "The reduce-scatter runs with fp32 and with bf16 on the wire."});
}

}  // namespace

std::vector<Command> make_commands() {
  const SyntheticSpec syn;
  const FolderSpec folder;
  const std::string out_help = "the dataset file to write, in vitkd's HDF5 layout";
  std::vector<Command> c;
  c.push_back({"train", "Train a teacher or distill a student, as the configuration says.",
               {{"CONFIG.toml", "the run's configuration in TOML; 'vitkd keys' lists every key"}},
               {Flag::text("set", "section.key=value", "override one configuration key").many()},
               "Launch with mpirun or srun for several ranks; --set=section.key=value works too."});
  c.push_back({"prepare fashion-mnist", "Convert Fashion-MNIST (the four *-ubyte.gz files) into a dataset file.",
               {},
               {Flag::path("out", "FILE.h5", out_help).needed(),
                Flag::path("source", "DIR", "the folder with the *-ubyte.gz files")
                    .default_to("/usr/share/datasets/fashion-mnist"),
                val_fraction_flag(), val_seed_flag()},
               "The default folder is where Debian's dataset-fashion-mnist package puts the gzip IDX files."});
  c.push_back({"prepare synthetic", "Write a learnable synthetic dataset (class templates plus noise).",
               {},
               {Flag::path("out", "FILE.h5", out_help).needed(),
                Flag::count("train", "N", "training samples").at_least(1).default_to(std::to_string(syn.train)),
                Flag::count("test", "N", "test samples").at_least(1).default_to(std::to_string(syn.test)),
                Flag::count("size", "S", "image height = width in pixels").at_least(4)
                    .default_to(std::to_string(syn.size)),
                Flag::count("channels", "C", "channels per pixel").at_least(1)
                    .default_to(std::to_string(syn.channels)),
                Flag::count("classes", "K", "number of classes").at_least(2)
                    .default_to(std::to_string(syn.classes)),
                Flag::count("seed", "S", "random seed").default_to(std::to_string(syn.seed)),
                val_fraction_flag(), val_seed_flag()}});
  c.push_back({"prepare folder", "Convert a folder of PNG/JPEG images, one subfolder per class, into a dataset file.",
               {{"DIR", "the image folder: DIR/<class name>/<image>.png|.jpg|.jpeg"}},
               {Flag::path("out", "FILE.h5", out_help).needed(),
                Flag::count("size", "S", "output height = width in pixels").at_least(1).needed(),
                Flag::number("test-fraction", "F", "share of each class's images that goes to the test split")
                    .at_least(0).below(1).default_to(num(folder.test_fraction)),
                Flag::count("seed", "N", "seed of the train/test split").default_to(std::to_string(folder.seed)),
                Flag::integer("channels", "C", "channels per pixel: 1 luminance, 3 RGB").one_of({"1", "3"})
                    .default_to(std::to_string(folder.channels)),
                Flag::text("store", "K", "how the images are kept: raw (uint8 pixels) or jpeg (each resized image "
                           "as JPEG bytes, decoded by the loader; about a fifth of raw's size at 256 pixels)")
                    .one_of({"raw", "jpeg"}).default_to(folder.store),
                Flag::integer("quality", "Q", "the JPEG quality with --store jpeg, 1..100 (libjpeg's scale)")
                    .at_least(1).at_most(100).default_to(std::to_string(folder.quality)),
                val_fraction_flag(), val_seed_flag()},
               "Every rank decodes a share of the images; unreadable files are reported and skipped."});
  c.push_back({"export", "Write the student of a checkpoint for PyTorch: weights, loader, reference logits.",
               {{"CHECKPOINT.h5", "a checkpoint written by 'vitkd train'"}},
               {Flag::path("out", "DIR", "the directory to write into, created if missing").needed(),
                Flag::path("data", "FILE.h5",
                           "the dataset whose normalization and class names go into model.json "
                           "(default: the checkpoint's data.path, if readable)"),
                Flag::integer("batch", "N", "samples in reference.h5").at_least(1).at_most(4096).default_to("8")}});
  c.push_back({"inspect", "Summarise a vitkd dataset, checkpoint, timing log or teacher-view cache.",
               {{"FILE.h5", "the file to summarise"}}, {},
               "Any other HDF5 file: its top-level objects."});
  add_bench_commands(c);
  c.push_back({"teacher-cache", "Run the teacher once over E epochs' augmented views and write a teacher-view cache.",
               {{"CONFIG.toml", "the distillation configuration (data, teacher, augmentation, run.seed, distill.*)"}},
               {Flag::text("set", "section.key=value", "override one configuration key").many()},
               "Writes distill.teacher_cache_file (default run.out_dir/teacher_views.h5): distill.cache_epochs "
               "epochs of views, each with the teacher's top distill.cache_top_k probabilities. Students replay "
               "it with distill.teacher_cache = true; see docs/teacher-cache.md. Launch with mpirun for several ranks."});
  c.push_back({"keys", "List every configuration key with its type, default and meaning.", {},
               {Flag::on_off("markdown", "print the list as docs/configuration.md (a Markdown page)")}});
  c.push_back({"version", "Print the version (also: vitkd --version).", {}, {},
               "E.g. 'vitkd 0.3.0 (git ea35fef)': the commit when built from a git checkout of its own."});
  c.push_back({"help", "Print this overview, or a command's help (same as vitkd COMMAND --help).",
               {{"COMMAND", "a command, e.g. export or prepare", false}},
               {Flag::on_off("markdown", "print every command's page as docs/commands.md (Markdown)")}});
  return c;
}

}  // namespace cli
}  // namespace vitkd
