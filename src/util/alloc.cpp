#include "util/alloc.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

extern char** environ;

namespace vitkd {

bool keep_freed_memory() {
#if defined(__GLIBC__)
  for (char** e = environ; e && *e; ++e) {
    const char* v = *e;
    if (std::strncmp(v, "GLIBC_TUNABLES=", 15) == 0 || std::strncmp(v, "MALLOC_", 7) == 0) return false;
  }
  const bool ok_mmap = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;  // glibc's maximum
  const bool ok_trim = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;   // effectively never
  return ok_mmap && ok_trim;
#else
  return false;
#endif
}

}  // namespace vitkd
