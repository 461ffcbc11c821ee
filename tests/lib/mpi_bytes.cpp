// Linked into the MPI test binary (vitkd_mpi_tests) only.
#include "mpi_bytes.hpp"

#include <mpi.h>

// The PMPI profiling interface: these definitions take the place of the MPI
// library's for every call in this binary (vitkd_lib included) and forward to
// PMPI_*. They count the bytes of this rank's data handed to the collectives
// the communicator uses, from each call's own count and datatype arguments:
// an independent measure of what Communicator::bytes_sent() reports.
namespace vitkd::test {
int64_t g_mpi_bytes = 0;
}  // namespace vitkd::test

namespace {
int64_t type_bytes(MPI_Datatype t) {
  int s = 0;
  PMPI_Type_size(t, &s);
  return s;
}
int64_t scatter_elems(const int counts[], MPI_Comm comm) {
  int p = 0;
  PMPI_Comm_size(comm, &p);
  int64_t n = 0;
  for (int q = 0; q < p; ++q) n += counts[q];
  return n;
}
}  // namespace

using vitkd::test::g_mpi_bytes;

int MPI_Ireduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request* req) {
  g_mpi_bytes += scatter_elems(counts, comm) * type_bytes(type);
  return PMPI_Ireduce_scatter(send, recv, counts, type, op, comm, req);
}
int MPI_Reduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  g_mpi_bytes += scatter_elems(counts, comm) * type_bytes(type);
  return PMPI_Reduce_scatter(send, recv, counts, type, op, comm);
}
int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm) {
  g_mpi_bytes += send == MPI_IN_PLACE ? int64_t(recv_count) * type_bytes(recv_type)
                                      : int64_t(send_count) * type_bytes(send_type);
  return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
}
int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                   const int displs[], MPI_Datatype recv_type, MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  g_mpi_bytes += send == MPI_IN_PLACE ? int64_t(recv_counts[rank]) * type_bytes(recv_type)
                                      : int64_t(send_count) * type_bytes(send_type);
  return PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm);
}
