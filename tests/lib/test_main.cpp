// Shared main for the test binaries: MPI (a singleton world when not launched
// by mpirun), Kokkos, and quiet HDF5, as in vitkd itself.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "comm/world.hpp"
#include "io/h5.hpp"
#include "util/kokkos_session.hpp"

namespace {
// On ranks other than 0, the failed assertions only, marked with the rank
// (their full result printer is off, so that the output stays readable).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // (The test's name is kept here: asking UnitTest for it while it reports a
  // result would wait on its own lock.)
  void OnTestStart(const ::testing::TestInfo& t) override {
    test_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_;
};
}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  vitkd::init_world(&argc, &argv);
  vitkd::h5_silence_errors();
  int rc = 0;
  {
    // Kokkos as vitkd starts it (util/kokkos_session.hpp), with any
    // --kokkos-* arguments of the command line.
    std::vector<std::string> kokkos_args;
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]).rfind("--kokkos", 0) == 0) kokkos_args.emplace_back(argv[i]);
    vitkd::kokkos_set_arguments(kokkos_args);
    vitkd::KokkosScope kokkos;
    vitkd::kokkos_ensure(0);
    // Only rank 0 prints results; all ranks run every test, and the others
    // print their failures.
    if (vitkd::world().rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(vitkd::world().rank));
    }
    rc = RUN_ALL_TESTS();
    // A failure on any rank fails the run on every rank.
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    rc = any;
  }
  vitkd::finalize_world();
  return rc;
}
