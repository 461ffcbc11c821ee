// Shared main for the test binaries: MPI (a singleton world when not launched
// by mpirun), Kokkos, and quiet HDF5, as in vitkd itself.
#include <gtest/gtest.h>
#include <mpi.h>

#include <Kokkos_Core.hpp>

#include "comm/world.hpp"
#include "io/h5.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  vitkd::init_world(&argc, &argv);
  vitkd::h5_silence_errors();
  int rc = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    // Only rank 0 prints results; all ranks run every test.
    if (vitkd::world().rank != 0) {
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
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
