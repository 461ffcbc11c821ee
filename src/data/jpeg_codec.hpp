#pragma once
// JPEG in memory through libjpeg(-turbo), for the JPEG-stored dataset layout
// (data/image_store.hpp): one encoder for `vitkd prepare folder --store jpeg`
// and one decoder for every reader of such a file.
//
// The decoder is deterministic: the integer inverse DCT (JDCT_ISLOW) and
// libjpeg's default ("fancy") chroma upsampling, whose SIMD versions give the
// same bits as the plain C code, at full size (no DCT-domain scaling). The
// same bytes decode to the same pixels on every rank and in every run.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

/// Encodes pixels [h, w, c] (uint8, row-major, c = 1 grey or 3 RGB) as a
/// baseline JPEG of `quality` (1..100; libjpeg's scale), 4:2:0 chroma for RGB
/// (libjpeg's default, as PIL's `save(quality=...)`).
std::vector<uint8_t> jpeg_encode(const uint8_t* pixels, int64_t h, int64_t w, int64_t c, int quality);

/// Decodes `n` bytes of JPEG into `out` [h, w, c]. Returns "" on success,
/// else why not (libjpeg's message for corrupt data, including its warnings
/// about damaged data, or a shape other than h x w x c); `out` is then
/// unspecified.
std::string jpeg_decode(const uint8_t* bytes, size_t n, int64_t h, int64_t w, int64_t c, uint8_t* out);

}  // namespace vitkd
