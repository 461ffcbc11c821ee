#pragma once
// The MPI world: rendezvous, rank layout and the few small collectives the
// rest of the program needs. Gradient communication lives in comm/comm.hpp.
#include <cstdint>
#include <string>
#include <vector>

namespace vitkd {

struct World {
  int rank = 0;        ///< rank in MPI_COMM_WORLD
  int size = 1;        ///< ranks in MPI_COMM_WORLD
  int local_rank = 0;  ///< rank among the ranks on this node (MPI_COMM_TYPE_SHARED)
  int local_size = 1;  ///< ranks on this node
  std::string host;    ///< this rank's hostname
  /// Thread level the MPI library granted (MPI_THREAD_* of MPI_Init_thread).
  int thread_level = 0;
  /// Whether MPI may be called from any one thread at a time (granted level
  /// >= MPI_THREAD_SERIALIZED): a CUDA LibTorch runs the gradient hooks, which
  /// start bucket reductions, on its autograd device thread.
  bool mpi_serialized = false;
  bool root() const { return rank == 0; }
};

/// MPI_Init_thread asking for MPI_THREAD_SERIALIZED (one thread at a time,
/// not only the main one: on CUDA the bucket hooks run on LibTorch's autograd
/// thread), with what the library granted kept in World; below FUNNELED is a
/// runtime error (a CUDA run refuses less than SERIALIZED, comm/device.cpp).
/// Then the node-local split, and a check that the world size matches
/// SLURM_NTASKS / OMPI_COMM_WORLD_SIZE when the launcher set them.
World init_world(int* argc, char*** argv);
void finalize_world();

/// The world set up by init_world (a 1-rank world before that).
const World& world();

// Small collectives over MPI_COMM_WORLD, checked through VK_CHECK.
void barrier();
double allreduce_sum(double v);
int64_t allreduce_sum(int64_t v);
double allreduce_max(double v);
void allreduce_sum_inplace(float* data, int64_t count);
void allreduce_sum_inplace(double* data, int64_t count);
void broadcast_bytes(void* data, int64_t bytes, int root);
/// Rank 0's string on every rank (the argument is ignored on the others).
std::string broadcast_string(const std::string& mine);
int64_t allreduce_min(int64_t v);
/// Concatenation of every rank's vector, in rank order, on every rank.
std::vector<double> allgatherv(const std::vector<double>& mine);
/// Gathers one double per rank onto every rank.
std::vector<double> allgather(double v);

/// printf on rank 0 only, flushed (progress output).
void log0(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace vitkd
