// The augmentation policy (data/transforms/transforms.hpp): TrivialAugmentWide
// (Mueller and Hutter 2021) as torchvision's TrivialAugmentWide implements it,
// one op per view with a uniform magnitude bin; the geometric ops as inverse
// affine maps for the batch kernel, the colour ops on the rendered view.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "data/transforms/transforms.hpp"
#include "util/hash.hpp"

namespace vitkd {
namespace {

constexpr double kPi = 3.14159265358979323846;

bool signed_op(PolicyOpKind op) {
  switch (op) {
    case PolicyOpKind::ShearX: case PolicyOpKind::ShearY: case PolicyOpKind::TranslateX:
    case PolicyOpKind::TranslateY: case PolicyOpKind::Rotate: case PolicyOpKind::Brightness:
    case PolicyOpKind::Color: case PolicyOpKind::Contrast: case PolicyOpKind::Sharpness:
      return true;
    default:
      return false;
  }
}

// torchvision's _get_inverse_affine_matrix (angle in degrees, clockwise as
// F.affine takes it; centre and translation in pixels from the view's centre).
void inverse_affine(double cx, double cy, double angle, double tx, double ty, double shx, double shy, float m[6]) {
  const double rot = angle * kPi / 180, sx = shx * kPi / 180, sy = shy * kPi / 180;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  double k[6] = {d, -b, 0.0, -c, a, 0.0};
  k[2] += k[0] * (-cx - tx) + k[1] * (-cy - ty);
  k[5] += k[3] * (-cx - tx) + k[4] * (-cy - ty);
  k[2] += cx;
  k[5] += cy;
  for (int i = 0; i < 6; ++i) m[i] = static_cast<float>(k[i]);
}

// torchvision's equalize (PIL's algorithm) as a lookup table for one channel
// of n pixels `q` (the identity when the histogram is too narrow).
std::array<float, 256> equalize_lut(const uint8_t* q, int64_t n) {
  std::array<int64_t, 256> hist{};
  for (int64_t i = 0; i < n; ++i) ++hist[q[i]];
  int top = 255;
  while (top > 0 && hist[top] == 0) --top;  // the largest value present
  const int64_t step = (n - hist[top]) / 255;
  std::array<float, 256> lut{};
  int64_t cum = 0;
  for (int v = 0; v < 256; ++v) {
    lut[v] = step == 0 ? float(v) : float(std::min<int64_t>(255, v == 0 ? 0 : (cum + step / 2) / step));
    cum += hist[v];
  }
  return lut;
}

}  // namespace

const char* policy_op_name(PolicyOpKind op) {
  static const char* names[kPolicyOps] = {"Identity", "ShearX", "ShearY", "TranslateX", "TranslateY",
                                          "Rotate", "Brightness", "Color", "Contrast", "Sharpness",
                                          "Posterize", "Solarize", "AutoContrast", "Equalize"};
  return names[static_cast<int>(op)];
}

bool is_geometric(PolicyOpKind op) {
  return op == PolicyOpKind::ShearX || op == PolicyOpKind::ShearY || op == PolicyOpKind::TranslateX ||
         op == PolicyOpKind::TranslateY || op == PolicyOpKind::Rotate;
}

float policy_magnitude(PolicyOpKind op, int bin) {
  const double t = double(bin) / double(kPolicyBins - 1);  // torch.linspace(lo, hi, 31)[bin]
  switch (op) {
    case PolicyOpKind::ShearX: case PolicyOpKind::ShearY: case PolicyOpKind::Brightness:
    case PolicyOpKind::Color: case PolicyOpKind::Contrast: case PolicyOpKind::Sharpness:
      return static_cast<float>(0.99 * t);
    case PolicyOpKind::TranslateX: case PolicyOpKind::TranslateY:
      return static_cast<float>(32.0 * t);
    case PolicyOpKind::Rotate:
      return static_cast<float>(135.0 * t);
    case PolicyOpKind::Posterize:  // 8 - round(bin / ((31 - 1) / 6)): 8 bits down to 2
      return static_cast<float>(8 - std::lround(double(bin) / 5.0));
    case PolicyOpKind::Solarize:
      return static_cast<float>(255.0 - 255.0 * t);
    default:
      return 0.0f;
  }
}

PolicyOp policy_op(const AugmentSpec& aug, int64_t epoch, int64_t index) {
  PolicyOp p;
  if (!aug.policy()) return p;
  // Sample bits: r ^ 1 the op, r ^ 2 the magnitude bin, r ^ 3 the sign.
  const uint64_t r = hash64(aug.seed, 0x504f4c49ULL /* "POLI" */, static_cast<uint64_t>(epoch),
                            static_cast<uint64_t>(index));
  p.op = static_cast<PolicyOpKind>(uniform_below(mix64(r ^ 1), kPolicyOps));
  p.magnitude = policy_magnitude(p.op, static_cast<int>(uniform_below(mix64(r ^ 2), kPolicyBins)));
  if (signed_op(p.op) && (mix64(r ^ 3) & 1)) p.magnitude = -p.magnitude;
  return p;
}

void policy_affine(const PolicyOp& op, int64_t s, float m[6]) {
  const double half = 0.5 * double(s), mag = op.magnitude;
  const double shear = std::atan(mag) * 180 / kPi;
  switch (op.op) {
    case PolicyOpKind::ShearX: inverse_affine(-half, -half, 0, 0, 0, shear, 0, m); break;  // centre [0, 0]
    case PolicyOpKind::ShearY: inverse_affine(-half, -half, 0, 0, 0, 0, shear, m); break;
    case PolicyOpKind::TranslateX: inverse_affine(0, 0, 0, std::trunc(mag), 0, 0, 0, m); break;
    case PolicyOpKind::TranslateY: inverse_affine(0, 0, 0, 0, std::trunc(mag), 0, 0, m); break;
    case PolicyOpKind::Rotate: inverse_affine(0, 0, -mag, 0, 0, 0, 0, m); break;  // F.rotate: counter-clockwise
    default: inverse_affine(0, 0, 0, 0, 0, 0, 0, m); break;
  }
}

void apply_colour_op(const PolicyOp& op, int64_t c, int64_t s, const std::vector<double>& mean,
                     const std::vector<double>& std, float* view) {
  if (op.op == PolicyOpKind::Identity || is_geometric(op.op)) return;
  const int64_t plane = s * s;
  // The view as torchvision's resize leaves it: uint8, rounded. (Buffers kept
  // per thread: a fresh 600 KB vector per view is an mmap and its page faults.)
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> out;
  q.resize(static_cast<size_t>(c * plane));
  std::vector<float> scale(c), shift(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    scale[ch] = static_cast<float>(1.0 / (255.0 * std[ch]));
    shift[ch] = static_cast<float>(-mean[ch] / std[ch]);
    const float to_grey = static_cast<float>(255.0 * std[ch]), offset = static_cast<float>(255.0 * mean[ch]);
    const float* v = view + ch * plane;
    uint8_t* o = q.data() + ch * plane;
    for (int64_t i = 0; i < plane; ++i) {
      // Round half to even (adding and taking away 2^23 in float), clamped;
      // min/max and an int32 step rather than std::clamp's branches and a
      // direct uint8 cast, so that the compiler vectorizes the loop (the same
      // values: nothing here is NaN).
      const float g = std::min(std::max(v[i] * to_grey + offset, 0.0f), 255.0f);
      o[i] = static_cast<uint8_t>(static_cast<int32_t>((g + 8388608.0f) - 8388608.0f));
    }
  }
  const float f = 1.0f + op.magnitude;
  // _blend(image, other, f) on uint8: f * image + (1 - f) * other, clamped, truncated.
  // (Truncation of values >= 0 by an integer cast: std::trunc may be a libm call.)
  auto blend = [&](float v, float other) {
    return float(int(std::clamp(f * v + (1.0f - f) * other, 0.0f, 255.0f)));
  };
  // torchvision's grey: 0.2989 R + 0.587 G + 0.114 B in float, floored for uint8 images.
  auto grey = [&](int64_t i) {
    return float(int(float(q[i]) * 0.2989f + float(q[plane + i]) * 0.587f + float(q[2 * plane + i]) * 0.114f));
  };
  if (op.op == PolicyOpKind::Color || op.op == PolicyOpKind::Sharpness) {
    // Ops that read a pixel's neighbours or its other channels: a result image.
    out.assign(q.begin(), q.end());
    if (op.op == PolicyOpKind::Color && c == 3) {
      for (int64_t i = 0; i < plane; ++i) {
        const float gi = grey(i);
        for (int64_t ch = 0; ch < 3; ++ch) out[ch * plane + i] = blend(q[ch * plane + i], gi);
      }
    } else if (op.op == PolicyOpKind::Sharpness && s > 2) {
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t y = 1; y < s - 1; ++y)
          for (int64_t x = 1; x < s - 1; ++x) {
            const uint8_t* p = q.data() + ch * plane + y * s + x;
            float acc = 4.0f * float(p[0]);  // kernel [[1,1,1],[1,5,1],[1,1,1]] / 13
            for (int dy = -1; dy <= 1; ++dy)
              for (int dx = -1; dx <= 1; ++dx) acc += float(p[dy * s + dx]);
            const float blurred = (acc / 13.0f + 8388608.0f) - 8388608.0f, v = float(p[0]);  // round half to even
            out[ch * plane + y * s + x] = float(int(std::clamp(v + (1.0f - f) * (blurred - v), 0.0f, 255.0f)));
          }
    }
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < plane; ++i) view[ch * plane + i] = out[ch * plane + i] * scale[ch] + shift[ch];
    return;
  }
  // Ops of a pixel's own grey level (given the image's statistics): a table of
  // 256 results per channel, then one pass.
  for (int64_t ch = 0; ch < c; ++ch) {
    const uint8_t* qc = q.data() + ch * plane;
    std::array<float, 256> lut{};
    if (op.op == PolicyOpKind::Equalize) lut = equalize_lut(qc, plane);
    float lo = 0.0f, k = 1.0f, m = 0.0f;
    if (op.op == PolicyOpKind::AutoContrast) {
      const auto [lo_it, hi_it] = std::minmax_element(qc, qc + plane);
      float hi = *hi_it;
      lo = *lo_it;
      if (lo == hi) lo = 0.0f, hi = 255.0f;
      k = 255.0f / (hi - lo);
    }
    if (op.op == PolicyOpKind::Contrast) {  // the mean grey of the whole image (all channels)
      double sum = 0;
      for (int64_t i = 0; i < plane; ++i) sum += c == 3 ? grey(i) : float(q[i]);
      m = static_cast<float>(sum / double(plane));
    }
    const int bits = op.op == PolicyOpKind::Posterize ? static_cast<int>(op.magnitude) : 8;
    const uint8_t mask = static_cast<uint8_t>(0xff ^ ((1 << (8 - bits)) - 1));
    for (int g = 0; g < 256; ++g) {
      const float v = float(g);
      switch (op.op) {
        case PolicyOpKind::Brightness: lut[g] = blend(v, 0.0f); break;
        case PolicyOpKind::Contrast: lut[g] = blend(v, m); break;
        case PolicyOpKind::Posterize: lut[g] = float(g & mask); break;
        case PolicyOpKind::Solarize: lut[g] = v >= op.magnitude ? 255.0f - v : v; break;
        case PolicyOpKind::AutoContrast: lut[g] = float(int(std::clamp((v - lo) * k, 0.0f, 255.0f))); break;
        case PolicyOpKind::Equalize: break;  // the table above
        default: lut[g] = v; break;
      }
      lut[g] = lut[g] * scale[ch] + shift[ch];
    }
    float* vc = view + ch * plane;
    for (int64_t i = 0; i < plane; ++i) vc[i] = lut[qc[i]];
  }
}

}  // namespace vitkd
