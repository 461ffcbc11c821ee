#pragma once
// exp(t) in fp32 registers for the hand-vectorised kernels (GELU, softmax):
// branch-free, so that GCC vectorises the loops that call it.
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace vitkd {

/// exp(t) for t <= 88: 2^n e^r with n = round(t / ln 2), |r| <= ln2 / 2, e^r by
/// its Taylor polynomial to r^6 (relative error below 2e-7). t is clamped at
/// -87, so that 2^n stays a normal float: exp of anything below gives
/// exp(-87), about 1.6e-38, where the exact value would be smaller still.
inline float fast_exp(float t) {
  t = std::max(t, -87.0f);
  const float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f,
              kLn2Lo = 1.42860682030941723e-6f, kRound = 12582912.0f;  // 1.5 * 2^23
  const float n = (t * kLog2e + kRound) - kRound;  // round to nearest
  const float r = (t - n * kLn2Hi) - n * kLn2Lo;
  const float er =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return er * scale;
}

}  // namespace vitkd
