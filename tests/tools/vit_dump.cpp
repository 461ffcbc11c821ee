// Writes a randomly initialised ViT as a vitkd checkpoint, plus a fixed input
// batch and the C++ model's fp32 logits, for tests/tools/vit_reference.py.
//   vit_dump OUT_DIR
#include <cstdio>

#include "comm/world.hpp"
#include "fixtures.hpp"
#include "io/checkpoint.hpp"
#include "io/h5.hpp"

using namespace vitkd;

int main(int argc, char** argv) {
  init_world(&argc, &argv);
  h5_silence_errors();
  if (argc != 2) {
    std::fprintf(stderr, "usage: vit_dump OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const ModelSpec s = test::Spec().image(12).channels(3).patch(4).dim(24).depth(2).heads(3)
                          .mlp_ratio(2.5).classes(5).dist_token();
  torch::manual_seed(3);
  ViT m(s);
  // Give biases and norms non-trivial values too, so that every parameter is checked.
  {
    torch::NoGradGuard ng;
    for (auto& p : m->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  m->eval();
  CheckpointInfo info;
  info.spec = s;
  info.mode = "teacher";
  save_checkpoint(dir + "/checkpoint.h5", m, info);
  auto x = torch::randn({4, 3, 12, 12});
  torch::NoGradGuard ng;
  auto out = m->forward(x);
  auto cls = out.logits.contiguous(), dist = out.dist_logits.contiguous(), pred = out.prediction().contiguous();
  H5Obj f = h5_create(dir + "/logits.h5");
  h5_write(f, "input", x.data_ptr<float>(), x.sizes().vec());
  h5_write(f, "logits", cls.data_ptr<float>(), cls.sizes().vec());
  h5_write(f, "dist_logits", dist.data_ptr<float>(), dist.sizes().vec());
  h5_write(f, "prediction", pred.data_ptr<float>(), pred.sizes().vec());
  f.close();
  finalize_world();
  return 0;
}
