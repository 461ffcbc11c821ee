// The pipeline: each sample's view chosen (crops.cpp), the batch resampled,
// normalized and erased (resample.cpp, erasing.cpp), then mixed with the
// partners' views (mixing.cpp).
#include "data/transforms/transforms.hpp"

#include <algorithm>
#include <cstdio>

#include "util/error.hpp"

namespace vitkd {
namespace {

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

}  // namespace

int64_t output_side(const AugmentSpec& aug, int64_t h) { return aug.out > 0 ? aug.out : h; }

std::string transform_text(const AugmentSpec& aug, int64_t h, int64_t w) {
  const int64_t s = output_side(aug, h);
  std::string t = "data.augment = " + std::string(aug.enabled ? "true" : "false");
  if (aug.enabled) {
    if (aug.crop == CropKind::Pad) {
      t += ", " + setting_text("data.crop", CropKind::Pad) + ", data.crop_pad = " + std::to_string(aug.pad);
    } else {
      t += ", " + setting_text("data.crop", CropKind::RandomResized) + ", data.crop_scale = [" +
           number(aug.scale_min) + ", " +
           number(aug.scale_max) + "], data.crop_ratio = [" + number(aug.ratio_min) + ", " + number(aug.ratio_max) +
           "]";
    }
    t += ", data.flip = " + std::string(aug.flip ? "true" : "false");
    if (aug.policy()) t += ", " + setting_text("data.policy", Policy::TrivialAugment);
    if (aug.erasing()) t += ", data.random_erase = " + number(aug.erase_prob);
    if (aug.mixing())
      t += ", data.mixup = " + number(aug.mix.mixup_alpha) + ", data.cutmix = " + number(aug.mix.cutmix_alpha) +
           ", data.mixup_prob = " + number(aug.mix.prob) + ", data.mixup_switch_prob = " + number(aug.mix.switch_prob);
  } else if (h != s || w != s) {
    t += ", data.crop_pct = " + number(aug.crop_pct);  // the evaluation view of larger images
  }
  if (h != s || w != s) t += ", model.image_size = " + std::to_string(s);
  return t;
}

namespace {

// The views of samples `indices` [n] (their pixels, their views) as the
// model sees them before mixing: resampled through the policy's geometric op,
// the policy's colour op, erased. Into `out` [n, C, S, S].
void render_samples(const AugmentSpec& aug, int64_t epoch, const uint8_t* pixels, const ViewParams* views,
                    const int64_t* indices, int64_t n, int64_t h, int64_t w, int64_t c, const std::vector<double>& mean,
                    const std::vector<double>& std, bool serial, float* out) {
  const int64_t s = output_side(aug, h);
  RenderPass pass;
  pass.serial = serial;
  pass.pixels = pixels;
  pass.views = views;
  std::vector<PolicyOp> ops;
  std::vector<float> affine;
  std::vector<uint8_t> geometric;
  if (aug.policy()) {
    ops.resize(static_cast<size_t>(n));
    affine.assign(static_cast<size_t>(6 * n), 0.f);
    geometric.assign(static_cast<size_t>(n), 0);
    for (int64_t b = 0; b < n; ++b) {
      ops[b] = policy_op(aug, epoch, indices[b]);
      if (is_geometric(ops[b].op)) {
        geometric[b] = 1;
        policy_affine(ops[b], s, affine.data() + 6 * b);
      }
    }
    pass.affine = affine.data();
    pass.geometric = geometric.data();
  }
  render_views(pass, n, h, w, c, mean, std, aug.out, out);
  for (size_t b = 0; b < ops.size(); ++b) apply_colour_op(ops[b], c, s, mean, std, out + b * c * s * s);
  if (aug.erasing()) {
    std::vector<EraseBox> boxes(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; ++b) boxes[b] = erase_box(aug, epoch, indices[b], s);
    apply_erasing(boxes.data(), indices, erase_noise_key(aug, epoch), n, c, s, out);
  }
}

}  // namespace

void transform_batch(const ImageBatch& b, const AugmentSpec& aug, const std::vector<double>& mean,
                     const std::vector<double>& std, const ViewParams* views, const ViewParams* partner_views,
                     int64_t classes, float* x, float* y_soft) {
  const int64_t n = b.n, s = output_side(aug, b.h);
  if (n == 0) return;
  std::vector<ViewParams> own;
  if (!views) {
    own.resize(static_cast<size_t>(n));
    view_params(aug, b.epoch, b.indices, n, b.h, b.w, own.data());
    views = own.data();
  }
  render_samples(aug, b.epoch, b.pixels, views, b.indices, n, b.h, b.w, b.c, mean, std, b.serial, x);
  if (!aug.mixing()) return;
  if (!b.partner_indices || !b.partner_labels || !b.partner_pos || !y_soft)
    throw RuntimeError("transform_batch: mixing needs the partners' indices, labels and positions");
  std::vector<MixParams> mix(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) mix[k] = mix_params(aug, b.epoch, b.indices[k], b.partner_indices[k], s);
  // Partners in the batch: each pair mixed from both views as rendered above.
  std::vector<int64_t> pairs;
  for (int64_t k = 0; k < n; ++k)
    if (b.partner_pos[k] > k) pairs.insert(pairs.end(), {k, b.partner_pos[k]});
  mix_pairs(pairs.data(), static_cast<int64_t>(pairs.size() / 2), mix.data(), b.c, s, x);
  // Partners read beside the batch (partner_pixels, in sample order): their
  // views rendered the same way, then mixed in.
  std::vector<int64_t> rows;
  for (int64_t k = 0; k < n; ++k)
    if (b.partner_pos[k] < 0) rows.push_back(k);
  const int64_t m = static_cast<int64_t>(rows.size());
  if (m > 0) {
    if (!b.partner_pixels) throw RuntimeError("transform_batch: partners outside the batch need their pixels");
    std::vector<ViewParams> pv(m);
    std::vector<int64_t> pidx(m);
    for (int64_t j = 0; j < m; ++j) {
      pidx[j] = b.partner_indices[rows[j]];
      pv[j] = partner_views ? partner_views[rows[j]] : view_params(aug, b.epoch, pidx[j], b.h, b.w);
    }
    const int64_t image = b.c * s * s;
    std::vector<float> other(static_cast<size_t>(m * image));
    render_samples(aug, b.epoch, b.partner_pixels, pv.data(), pidx.data(), m, b.h, b.w, b.c, mean, std, b.serial,
                   other.data());
    for (int64_t j = 0; j < m; ++j) mix_image(mix[rows[j]], x + rows[j] * image, other.data() + j * image, b.c, s);
  }
  std::fill(y_soft, y_soft + n * classes, 0.0f);
  for (int64_t k = 0; k < n; ++k) {
    y_soft[k * classes + b.labels[k]] += mix[k].lam;
    y_soft[k * classes + b.partner_labels[k]] += 1.0f - mix[k].lam;
  }
}

bool transform_ends_in_grey_levels(const AugmentSpec& aug) {
  return !aug.policy() && !aug.erasing() && !aug.mixing();
}

void transform_batch(const ImageBatch& b, const AugmentSpec& aug, const ViewParams* views, uint8_t* x) {
  if (!transform_ends_in_grey_levels(aug))
    throw RuntimeError("transform_batch: the policy, erasing and mixing work on normalized values, not grey levels");
  if (b.n == 0) return;
  std::vector<ViewParams> own;
  if (!views) {
    own.resize(static_cast<size_t>(b.n));
    view_params(aug, b.epoch, b.indices, b.n, b.h, b.w, own.data());
    views = own.data();
  }
  RenderPass pass;
  pass.serial = b.serial;
  pass.pixels = b.pixels;
  pass.views = views;
  render_views(pass, b.n, b.h, b.w, b.c, aug.out, x);
}

void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out) {
  if (aug.mixing()) throw RuntimeError("normalize_augment: mixing needs the partners (transform_batch)");
  ImageBatch b;
  b.n = n, b.h = h, b.w = w, b.c = c, b.epoch = epoch;
  b.pixels = pixels;
  b.indices = indices;
  transform_batch(b, aug, mean, std, nullptr, nullptr, 0, out, nullptr);
}

}  // namespace vitkd
