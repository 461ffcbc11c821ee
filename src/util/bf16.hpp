#pragma once
// bfloat16 <-> float for communication buffers and the bf16 kernels: LibTorch's
// own conversion (c10::BFloat16, round to nearest even; NaN becomes a quiet
// NaN), so vitkd's bf16 bytes are exactly what torch's bf16 tensors hold.
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>

#include <cstdint>

namespace vitkd {

inline uint16_t float_to_bf16(float f) { return c10::BFloat16(f).x; }

inline float bf16_to_float(uint16_t h) { return static_cast<float>(c10::BFloat16(h, c10::BFloat16::from_bits())); }

/// A bf16 tensor's values as their bit patterns (c10::BFloat16 is one
/// uint16_t), for the kernels that convert them with the two functions above.
inline uint16_t* bf16_bits(const at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

}  // namespace vitkd
