#pragma once
// bfloat16 <-> float for communication buffers and the GELU kernel: LibTorch's
// own conversion (c10::BFloat16, round to nearest even; NaN becomes a quiet
// NaN), so vitkd's bf16 bytes are exactly what torch's bf16 tensors hold.
#include <c10/util/BFloat16.h>

#include <cstdint>

namespace vitkd {

inline uint16_t float_to_bf16(float f) { return c10::BFloat16(f).x; }

inline float bf16_to_float(uint16_t h) { return static_cast<float>(c10::BFloat16(h, c10::BFloat16::from_bits())); }

}  // namespace vitkd
