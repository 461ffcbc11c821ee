#pragma once
// The property every fuzz target checks: the code under test accepts the
// input or throws vitkd's UserError / RuntimeError. Anything else (another
// exception, a crash, a sanitizer report, die()/abort) is a finding.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "util/error.hpp"

namespace vitkd::fuzz {

[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "vitkd fuzz finding: %s\n", what);
  std::abort();
}

/// Runs f(); returns true if it returned, false if it threw a vitkd error.
template <class F> bool accepts(F&& f) {
  try {
    f();
    return true;
  } catch (const UserError& e) {
    if (std::getenv("VITKD_FUZZ_VERBOSE")) std::fprintf(stderr, "UserError: %s\n", e.what());
    return false;
  } catch (const RuntimeError& e) {
    if (std::getenv("VITKD_FUZZ_VERBOSE")) std::fprintf(stderr, "RuntimeError: %s\n", e.what());
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vitkd fuzz finding: escaped exception: %s\n", e.what());
    std::abort();
  } catch (...) {
    finding("escaped a non-std exception");
  }
}

}  // namespace vitkd::fuzz
