#pragma once
// The image transforms of the loader: from a stored image (uint8 [H, W, C])
// to the model's input (float [C, S, S], S = model.image_size), normalized
// per channel. One file per family:
//   crops.cpp     where a view's box lies: the padded random crop (the
//                 Fashion-MNIST and CIFAR recipe), the random-resized crop
//                 (torchvision's RandomResizedCrop) and the evaluation view
//                 (resize and centre crop, timm's crop_pct)
//   resample.cpp  the batch kernel ("Data::normalize_augment"): each view's
//                 box resampled to S x S (bilinear, or a copy with zero
//                 padding when the box has the output's size), mirrored when
//                 its flip is set, normalized, its erased box (if any) filled
//                 with noise, and in a second pass the mixing partner's view
//                 blended in (Mixup) or pasted into a box (CutMix)
//   resize.hpp    the one resizer: the bilinear taps of the kernel, and the
//                 area and bilinear resize of `vitkd prepare folder`
//   erasing.cpp   random erasing (timm's RandomErasing, mode "pixel")
//   mixing.cpp    Mixup and CutMix: the partners, their weights and boxes,
//                 the mixed soft labels (timm's Mixup, mode "elem")
//   transforms.cpp the pipeline: crop, flip, normalize, erase, mix
//
// Replayable views. The random choices of sample i are a pure function of
// (seed, epoch, i's index in the split) -- view_params() -- so they do not
// depend on the rank count or on the order samples arrive in, and they can be
// written down (ViewParams) and replayed later (normalize_views()): the live
// path normalize_augment() is exactly view_params() followed by
// normalize_views(), so both produce the same bits.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "util/hash.hpp"

namespace vitkd {

/// Mixup and CutMix as timm's Mixup in mode "elem": every sample draws its
/// own decision, kind and weight lam, and is mixed with one partner sample.
struct MixSpec {
  double mixup_alpha = 0;    ///< Mixup's lam ~ Beta(a, a); 0 = off (timm mixup_alpha)
  double cutmix_alpha = 0;   ///< CutMix's lam ~ Beta(a, a); 0 = off (timm cutmix_alpha)
  double prob = 1.0;         ///< probability that a sample is mixed (timm mixup_prob)
  double switch_prob = 0.5;  ///< with both on: probability of CutMix rather than Mixup (timm switch_prob)
  bool on() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// How a training view's box is chosen (data.crop, CropKind in
// config/choices.hpp): Pad, a shift in [-pad, pad], the box the stored size,
// zero padding; RandomResized, torchvision's RandomResizedCrop(scale, ratio).

struct AugmentSpec {
  bool enabled = false;  ///< off: the evaluation view (crop_pct), normalization
  CropKind crop = CropKind::Pad;
  int64_t pad = 2;       ///< Pad: crop shift range in pixels
  bool flip = true;      ///< random horizontal flip (probability 1/2)
  double scale_min = 0.08, scale_max = 1.0;      ///< RandomResized: box area / image area
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  ///< RandomResized: box width / height
  /// The evaluation view of images stored larger than the output (timm's
  /// crop_pct): the shorter side resized to floor(out / crop_pct), then the
  /// centred out x out crop. Images stored at the output size are used whole.
  double crop_pct = 0.875;
  int64_t out = 0;       ///< output side S in pixels (model.image_size); 0 = the stored H x W
  uint64_t seed = 0;
  /// Random erasing (timm's RandomErasing(probability, mode="pixel")): the
  /// probability that one box of 2-33 % of the view, aspect in [0.3, 3.33],
  /// is replaced by per-pixel normal noise in normalized units. 0 = off.
  double erase_prob = 0;
  MixSpec mix;           ///< Mixup / CutMix (training views only)
  /// The augmentation policy after the crop and flip (data.policy): false =
  /// none, true = TrivialAugmentWide (one op of 14 per view, torchvision's
  /// magnitudes).
  bool trivial_augment = false;
  bool policy() const { return enabled && trivial_augment; }
  /// Whether samples are mixed: augmentation on and Mixup or CutMix on.
  bool mixing() const { return enabled && mix.on(); }
  /// Whether views are erased: augmentation on and erase_prob > 0.
  bool erasing() const { return enabled && erase_prob > 0; }
};

/// The output side for images of h x w pixels: aug.out, or h when 0.
int64_t output_side(const AugmentSpec& aug, int64_t h);

/// The transform of images stored at h x w as one line of configuration
/// text, e.g. `data.augment = true, data.crop = "random_resized",
/// data.crop_scale = [0.08, 1], ..., model.image_size = 224`, naming only
/// what changes the views (data.crop_pct only without augmentation, the
/// output size only when it is not the stored size): what a teacher-view
/// cache records and compares.
std::string transform_text(const AugmentSpec& aug, int64_t h, int64_t w);

/// One view of one image, as it is stored (e.g. in a teacher-view cache).
/// Units are pixels of the stored image. The view is the crop box with
/// top-left corner (top, left) and size height x width -- rows and columns
/// outside the image read as 0 (the image zero-padded), so with the pad crop
/// top and left lie in [-pad, pad] -- resampled to the output size S x S
/// (a copy when the box is S x S), then, if flip = 1, mirrored left-right.
/// Boxes of another size than the output lie inside the image.
/// Without augmentation, at the stored size, a view is {0, 0, H, W, 0}.
struct ViewParams {
  int16_t top = 0;     ///< row of the box's first row in the image (pixels, may be < 0)
  int16_t left = 0;    ///< column of the box's first column (pixels, may be < 0)
  int16_t height = 0;  ///< box rows (pixels)
  int16_t width = 0;   ///< box columns (pixels)
  uint8_t flip = 0;    ///< 1: horizontal mirror after the crop
  bool operator==(const ViewParams& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width && flip == o.flip;
  }
};

/// The view of sample `index` in `epoch` for images of h x w pixels: a pure
/// function of (aug.seed, epoch, index) and of the spec.
ViewParams view_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t h, int64_t w);
/// view_params() for `n` samples `indices` into `out` [n].
void view_params(const AugmentSpec& aug, int64_t epoch, const int64_t* indices, int64_t n, int64_t h,
                 int64_t w, ViewParams* out);

/// The random-resized crop's box, given the uniform numbers it draws:
/// torchvision's RandomResizedCrop.get_params (up to 10 tries of an area
/// fraction u_area[t] in [0, 1) mapped to [scale_min, scale_max), a log-aspect
/// u_ratio[t], positions u_top[t], u_left[t]; then the centred fallback).
/// Rounding is half away from zero (Python rounds half to even).
ViewParams random_resized_box(const AugmentSpec& aug, int64_t h, int64_t w, const double* u_area,
                              const double* u_ratio, const double* u_top, const double* u_left);

/// The evaluation view's box for images of h x w pixels and output side s.
ViewParams eval_box(double crop_pct, int64_t h, int64_t w, int64_t s);

/// The erased box of one view, in output pixels (height 0: not erased).
struct EraseBox {
  int16_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const EraseBox& o) const {
    return top == o.top && left == o.left && height == o.height && width == o.width;
  }
};

/// The erased box of sample `index` in `epoch` for an output of s x s pixels:
/// a pure function of (aug.seed, epoch, index), as timm's RandomErasing
/// draws it (probability, then up to 10 tries of an area in [2 %, 1/3] of
/// the view and a log-uniform aspect in [0.3, 1/0.3], rounded; the box lies
/// strictly inside). {0,0,0,0} when erasing is off or not drawn.
EraseBox erase_box(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t s);
/// The noise of an erased pixel (normalized units, a standard normal; Box-Muller
/// in float from two 24-bit uniforms in (0, 1)): a pure function of (aug.seed, epoch,
/// sample index, channel, row, column). Inline: the batch kernel calls it.
inline float erase_noise(uint64_t noise_key, int64_t index, int64_t ch, int64_t y, int64_t x) {
  const uint64_t r = hash64(noise_key, static_cast<uint64_t>(index), static_cast<uint64_t>((ch << 40) ^ (y << 20) ^ x));
  const float u1 = (static_cast<float>(r >> 40) + 0.5f) * 0x1.0p-24f;  // 24 bits each: exact in float
  const float u2 = (static_cast<float>(r & 0xffffffULL) + 0.5f) * 0x1.0p-24f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
}
/// The per-(seed, epoch) key of erase_noise().
uint64_t erase_noise_key(const AugmentSpec& aug, int64_t epoch);

/// The mixing partners: in each epoch the split's n samples are paired by
/// the sample order of the loader (data/loader.hpp epoch_permutation(n,
/// seed, epoch)): positions 2k and 2k+1 are each other's partner, and the one
/// left over when n is odd is its own (then it is not mixed). A pure function
/// of (seed, epoch, index), whatever the ranks or the batch size. With the
/// loader's seed and an even data.batch_size both samples of a pair lie in one
/// rank's batch (global batches and their rank slices start at even
/// positions), so mixing reads and resamples nothing extra, as timm mixes
/// within a batch; otherwise (a teacher-view cache written with another seed,
/// the last partial batch, an odd batch size) the partners are read as well.
class MixPairing {
 public:
  MixPairing(uint64_t seed, int64_t n) : seed_(seed), n_(n) {}
  int64_t partner(int64_t epoch, int64_t index);
  std::vector<int64_t> partners(int64_t epoch, const std::vector<int64_t>& indices);

 private:
  void build(int64_t epoch);
  uint64_t seed_;
  int64_t n_, epoch_ = -1;
  std::vector<int64_t> perm_, pos_;
};

enum class MixKind : uint8_t { None = 0, Mixup = 1, CutMix = 2 };

/// How sample `index` is mixed with its partner in one epoch.
struct MixParams {
  int64_t partner = 0;         ///< the split index mixed in (the sample itself: not mixed)
  MixKind kind = MixKind::None;
  /// Weight of the sample's own view and label (the partner's: 1 - lam).
  /// CutMix: 1 - box area / S^2 (timm's correct_lam). 1 when not mixed.
  float lam = 1.0f;
  /// CutMix: the output rows [y0, y1) x columns [x0, x1) taken from the
  /// partner's view (timm's rand_bbox: side S * sqrt(1 - lam0) truncated,
  /// centred on a uniform pixel, clipped to the image).
  int16_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

/// The mixing of sample `index` (with partner `partner`) in `epoch` for an
/// output of s x s pixels: a pure function of (aug.seed, epoch, index).
MixParams mix_params(const AugmentSpec& aug, int64_t epoch, int64_t index, int64_t partner, int64_t s);
/// A Beta(a, a) sample from the counter-based stream `key` (Marsaglia and
/// Tsang's gamma method; a > 0).
double beta_symmetric(double a, uint64_t key);

/// TrivialAugmentWide's ops (torchvision, Mueller and Hutter 2021), in its order.
enum class PolicyOpKind : uint8_t {
  Identity, ShearX, ShearY, TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness, Posterize,
  Solarize, AutoContrast, Equalize,
};
constexpr int kPolicyOps = 14;
constexpr int kPolicyBins = 31;  ///< TrivialAugmentWide's num_magnitude_bins
/// The op a sample's view gets, with its magnitude (signed where the op is):
/// shear factor, translation in pixels (truncated to an integer), rotation in
/// degrees (counter-clockwise), enhancement m (factor 1 + m), posterize bits,
/// solarize threshold (grey levels).
struct PolicyOp {
  PolicyOpKind op = PolicyOpKind::Identity;
  float magnitude = 0;
};
const char* policy_op_name(PolicyOpKind op);
bool is_geometric(PolicyOpKind op);
/// The policy's op of sample `index` in `epoch`: a pure function of
/// (aug.seed, epoch, index); TrivialAugmentWide draws one op uniformly, one of
/// 31 magnitude bins uniformly, and the sign with probability 1/2. Identity
/// when the policy is off.
PolicyOp policy_op(const AugmentSpec& aug, int64_t epoch, int64_t index);
/// The magnitude of `op` at bin `bin` before the sign (torchvision's table).
float policy_magnitude(PolicyOpKind op, int bin);
/// The inverse affine map of a geometric op on an s x s view, as
/// torchvision's F.affine / F.rotate take it (nearest, fill 0): output pixel
/// centre (x, y), relative to the view's centre, comes from view point
/// (m[0] x + m[1] y + m[2], m[3] x + m[4] y + m[5]) (same origin).
void policy_affine(const PolicyOp& op, int64_t s, float m[6]);
/// A colour op (Brightness ... Equalize) on one view `view` [C, s, s],
/// normalized with `mean`/`std`, in place: as torchvision's functional op on
/// the view rounded to uint8 (its resize's output), the result truncated to
/// uint8 where torchvision's is. Geometric ops and Identity leave it as is.
void apply_colour_op(const PolicyOp& op, int64_t c, int64_t s, const std::vector<double>& mean,
                     const std::vector<double>& std, float* view);

/// A batch of stored images as the transforms read it, with each sample's
/// mixing partner when mixing is on (else the partner fields are null).
struct ImageBatch {
  int64_t n = 0, h = 0, w = 0, c = 0;  ///< samples, stored rows, columns, channels
  int64_t epoch = 0;
  const uint8_t* pixels = nullptr;     ///< [n, H, W, C]
  const int64_t* indices = nullptr;    ///< [n] split indices
  const int32_t* labels = nullptr;     ///< [n]
  const int64_t* partner_indices = nullptr;  ///< [n] each sample's partner (MixPairing)
  const int32_t* partner_labels = nullptr;   ///< [n]
  /// [n] the partner's position in this batch, or -1 when it is not in it
  /// (then its pixels are in partner_pixels)
  const int64_t* partner_pos = nullptr;
  /// [m, H, W, C] the pixels of the m partners not in the batch, in the
  /// order of their samples
  const uint8_t* partner_pixels = nullptr;
  bool serial = false;  ///< called on a loader thread (RenderPass::serial)
};

/// The whole training transform of a batch: each sample's view (from `views`
/// when given, e.g. a teacher-view cache's, else view_params()), normalized,
/// erased, then mixed with its partner's view: as rendered in this batch when
/// the partner is in it, else from `partner_views` [n] (indexed by sample;
/// read for the partners outside the batch only), else view_params(). `x` [n, C, S, S]; `y_soft` [n, classes], the mixed label
/// lam * onehot(y) + (1 - lam) * onehot(y_partner), written when mixing (may
/// be null otherwise).
void transform_batch(const ImageBatch& b, const AugmentSpec& aug, const std::vector<double>& mean,
                     const std::vector<double>& std, const ViewParams* views, const ViewParams* partner_views,
                     int64_t classes, float* x, float* y_soft);

/// `out` must hold n*C*S*S floats, S = aug.out (n*C*H*W when aug.out = 0). `mean`/`std` are
/// per channel in pixel/255 units.
void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out);

/// The batch kernel ("Data::normalize_augment"): the views `views` [n] of
/// `pixels` [n, H, W, C] resampled to s x s and normalized into `out` [n, C,
/// s, s]; where `affine` [n, 6] is given and `geometric[b]` is set, output
/// pixel (y, x) takes the view's pixel at the nearest point of the inverse
/// affine map (policy_affine()), 0 outside the view.
struct RenderPass {
  const uint8_t* pixels = nullptr;
  const ViewParams* views = nullptr;
  const float* affine = nullptr;       ///< [n, 6] or null
  const uint8_t* geometric = nullptr;  ///< [n] 1: apply affine[b]; null: none
  bool serial = false;                 ///< on Kokkos::Serial (a loader thread), not the default host space
};
/// Whether loader threads can run the transforms: Kokkos has its Serial
/// space (the default host space may be the compute threads' OpenMP).
bool transforms_can_run_on_loader_threads();
void render_views(const RenderPass& p, int64_t n, int64_t h, int64_t w, int64_t c, const std::vector<double>& mean,
                  const std::vector<double>& std, int64_t s, float* out);

/// render_views() without normalizing: each output pixel the view's grey
/// level, rounded half up where the view is resampled (a copy, mirror or
/// zero padding is exact), into `out` [n, C, s, s] (the stored size when
/// s = 0). normalization_table() then gives the values render_views() writes:
/// exactly where the view is a copy, within half a grey level where resampled.
void render_views(const RenderPass& p, int64_t n, int64_t h, int64_t w, int64_t c, int64_t s, uint8_t* out);
/// The normalized value of grey level g in channel ch, table[ch * 256 + g]
/// [C, 256]: made by render_views() itself, so the same bits as its copy path.
std::vector<float> normalization_table(int64_t c, const std::vector<double>& mean, const std::vector<double>& std);

/// Whether a training transform can end in grey levels (data.transfer =
/// "uint8"): every step after the crop, resample and flip works on normalized
/// values (the policy's colour ops, erasing's noise, mixing's blends), so
/// none of them may be on.
bool transform_ends_in_grey_levels(const AugmentSpec& aug);
/// transform_batch() for such a transform: each sample's view (from `views`
/// when given, else view_params()) as grey levels into `x` [n, C, S, S].
void transform_batch(const ImageBatch& b, const AugmentSpec& aug, const ViewParams* views, uint8_t* x);

/// The erased boxes `boxes` [n] of the views `out` [n, C, s, s] filled with
/// erase_noise(noise_key, indices[b], ...).
void apply_erasing(const EraseBox* boxes, const int64_t* indices, uint64_t noise_key, int64_t n, int64_t c, int64_t s,
                   float* out);

/// One view `own` [C, s, s] mixed as `m` with `other`: mix_value() per pixel
/// (Mixup: the whole image; CutMix: its box; not mixed: unchanged).
void mix_image(const MixParams& m, float* own, const float* other, int64_t c, int64_t s);
/// Mixes the pairs `pairs` [p, 2] of samples of `out` [n, C, s, s] with each
/// other (both views as rendered): sample k of a pair gets mix_image(mix[k],
/// its view, its partner's view).
void mix_pairs(const int64_t* pairs, int64_t p, const MixParams* mix, int64_t c, int64_t s, float* out);

/// The mixed value of output pixel (y, x) of a sample mixed as `m`, from its
/// own view's value and its partner's: the one formula of both mixing paths.
inline float mix_value(const MixParams& m, float own, float other, int64_t y, int64_t x) {
  if (m.kind == MixKind::Mixup) return m.lam * own + (1.f - m.lam) * other;
  if (m.kind == MixKind::CutMix && y >= m.y0 && y < m.y1 && x >= m.x0 && x < m.x1) return other;
  return own;
}

/// Replays the views `views` [n] on `pixels` [n, H, W, C] into `out`
/// [n, C, S, S], normalized as normalize_augment() does; the same bits as
/// normalize_augment() where the views are its view_params(). `s` = 0: the
/// stored size (out [n, C, H, W]).
void normalize_views(const uint8_t* pixels, const ViewParams* views, int64_t n, int64_t h, int64_t w,
                     int64_t c, const std::vector<double>& mean, const std::vector<double>& std,
                     float* out, int64_t s = 0);

}  // namespace vitkd
