#pragma once
// A reader that turns fuzz input bytes into decisions. Reads past the end
// yield zeros, so every input decodes to something.
#include <cstddef>
#include <cstdint>
#include <string>

namespace vitkd::fuzz {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v = (v << 8) | u8();
    return v;
  }
  int64_t i64() {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8) | u8();
    return static_cast<int64_t>(v);
  }
  /// A number in [0, n) (n > 0).
  uint32_t below(uint32_t n) { return (n <= 256 ? u8() : u32()) % n; }
  /// Picks one element of a C array.
  template <class T, size_t N> const T& pick(const T (&a)[N]) { return a[below(N)]; }
  /// A string of up to `max` raw bytes (length first).
  std::string str(size_t max) {
    size_t len = u8() % (max + 1);
    std::string s;
    for (size_t k = 0; k < len && !empty(); ++k) s.push_back(static_cast<char>(u8()));
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t i_ = 0;
};

}  // namespace vitkd::fuzz
