#pragma once
// Batch preprocessing as one Kokkos kernel ("Data::normalize_augment"):
// uint8 [n, H, W, C] pixels -> float [n, C, H, W], normalized per channel,
// with an optional random crop (zero-padded by `pad` pixels, i.e. a shift in
// [-pad, pad]) and horizontal flip. The random choices of sample i are a pure
// function of (seed, epoch, i's index in the split), so they do not depend on
// the rank count or on the order samples arrive in.
#include <cstdint>
#include <vector>

namespace vitkd {

struct AugmentSpec {
  bool enabled = false;  ///< off: normalization only
  int64_t pad = 2;       ///< crop shift range in pixels
  bool flip = true;      ///< random horizontal flip
  uint64_t seed = 0;
};

/// `out` must hold n*C*H*W floats. `mean`/`std` are per channel in pixel/255 units.
void normalize_augment(const uint8_t* pixels, const int64_t* indices, int64_t n, int64_t h,
                       int64_t w, int64_t c, const std::vector<double>& mean,
                       const std::vector<double>& std, const AugmentSpec& aug, int64_t epoch,
                       float* out);

}  // namespace vitkd
