// What reaches MPI, counted at the MPI boundary (tests/lib/mpi_bytes.cpp):
// the bytes of this rank's data handed to the collectives the communicator
// uses, an independent measure of what Communicator::bytes_sent() reports.
#pragma once

#include <cstdint>

namespace vitkd::test {
extern int64_t g_mpi_bytes;
}  // namespace vitkd::test
