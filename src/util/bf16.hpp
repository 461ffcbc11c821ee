#pragma once
// bfloat16 <-> float conversion (round to nearest even), for communication
// buffers. bf16 is the upper 16 bits of an IEEE float.
#include <cstdint>
#include <cstring>

namespace vitkd {

/// Branch-free (NaN becomes a quiet NaN of the same sign), so loops over it
/// vectorise (src/model/gelu.cpp relies on that).
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace vitkd
