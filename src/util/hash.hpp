#pragma once
// Counter-based random numbers: a value is a pure function of its key
// (seed, epoch, sample index, ...), so results never depend on call order,
// thread count or rank count. SplitMix64 finalizer (Steele et al. 2014).
#include <cstdint>

namespace vitkd {

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t hash64(uint64_t a) { return mix64(a); }
template <class... Rest> inline uint64_t hash64(uint64_t a, uint64_t b, Rest... rest) {
  return hash64(mix64(a) ^ b, static_cast<uint64_t>(rest)...);
}

/// Uniform double in [0, 1) from 53 random bits.
inline double to_unit(uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }

/// Uniform integer in [0, n) (Lemire's multiply-shift; bias < n / 2^64).
inline uint64_t uniform_below(uint64_t r, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

}  // namespace vitkd
