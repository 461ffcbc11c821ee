#include "util/kokkos_session.hpp"

#include <Kokkos_Core.hpp>

namespace vitkd {
namespace {
std::vector<std::string>& arguments() {
  static std::vector<std::string> a;
  return a;
}
// The thread-count flag of this Kokkos version (renamed in Kokkos 3.7).
#if defined(KOKKOS_VERSION) && KOKKOS_VERSION >= 30700
constexpr const char* kThreadsFlag = "--kokkos-num-threads=";
#else
constexpr const char* kThreadsFlag = "--kokkos-threads=";
#endif
}  // namespace

void kokkos_set_arguments(const std::vector<std::string>& args) { arguments() = args; }

void kokkos_ensure(int64_t threads) {
  if (Kokkos::is_initialized()) return;
  std::vector<std::string> args = arguments();
  bool user_set = false;
  for (const auto& a : args)
    user_set = user_set || a.rfind("--kokkos-threads", 0) == 0 || a.rfind("--kokkos-num-threads", 0) == 0;
  if (threads > 0 && !user_set) args.push_back(kThreadsFlag + std::to_string(threads));
  std::vector<char*> argv{const_cast<char*>("vitkd")};
  for (auto& a : args) argv.push_back(&a[0]);
  int argc = static_cast<int>(argv.size());
  argv.push_back(nullptr);
  Kokkos::initialize(argc, argv.data());
}

std::string kokkos_describe() {
  if (!Kokkos::is_initialized()) return "not initialised";
  using Space = Kokkos::DefaultHostExecutionSpace;
  const int n = Space().concurrency();
  return std::string(Space::name()) + ", " + std::to_string(n) + (n == 1 ? " thread" : " threads");
}

KokkosScope::~KokkosScope() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

}  // namespace vitkd
