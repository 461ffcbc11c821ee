#pragma once
// Kokkos in vitkd: initialised once per process, on first need, with the
// --kokkos-* arguments of the command line and, unless they set one, the
// host thread count the run asks for (train.threads), so that an OpenMP
// Kokkos runs the augmentation and AdamW kernels on the rank's threads.
// Finalised when main()'s KokkosScope ends.
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

/// main(): the --kokkos-* arguments, kept for the initialisation.
void kokkos_set_arguments(const std::vector<std::string>& args);

/// Initialises Kokkos if it is not yet (threads <= 0: Kokkos's own default).
/// Idempotent; a later call with another count changes nothing.
void kokkos_ensure(int64_t threads);

/// "Serial, 1 thread" / "OpenMP, 4 threads": the host backend in use.
std::string kokkos_describe();

/// Finalises Kokkos at scope exit if it was initialised.
class KokkosScope {
 public:
  KokkosScope() = default;
  KokkosScope(const KokkosScope&) = delete;
  KokkosScope& operator=(const KokkosScope&) = delete;
  ~KokkosScope();
};

}  // namespace vitkd
