#include "comm/world.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "util/error.hpp"

namespace vitkd {
namespace {
World g_world;

// `var` is the launcher's task count, `rank_var` this process's task number.
void check_launcher_size(const char* var, const char* rank_var, int size) {
  const char* v = std::getenv(var);
  if (!v || !*v) return;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || n == size) return;
  // An MPI without the launcher's PMI starts every task as a one-rank world
  // of its own: each would print the line below. Only the launcher's task 0
  // does; the others leave with the same exit code, silently.
  const char* r = std::getenv(rank_var);
  if (size == 1 && r && *r && std::strtol(r, nullptr, 10) != 0) {
    MPI_Finalize();
    std::exit(kExitUser);
  }
  throw UserError(std::string("MPI world size is ") + std::to_string(size) + " but " + var + "=" +
                  v + "; launch with as many MPI ranks as the job's tasks (e.g. srun without -n, "
                  "or mpirun -n " + v + ")");
}
}  // namespace

World init_world(int* argc, char*** argv) {
  int provided = 0;
  VK_CHECK(MPI, MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_world.thread_level = provided;
  g_world.mpi_serialized = provided >= MPI_THREAD_SERIALIZED;
  if (provided < MPI_THREAD_FUNNELED)
    die(kExitRuntime, "the MPI library grants thread level " + std::to_string(provided) +
                          " (below MPI_THREAD_FUNNELED); vitkd's threads need at least FUNNELED "
                          "(SERIALIZED on GPUs): use an MPI built with thread support");
  VK_CHECK(MPI, MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank));
  VK_CHECK(MPI, MPI_Comm_size(MPI_COMM_WORLD, &g_world.size));
  MPI_Comm local;
  VK_CHECK(MPI, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank,
                                    MPI_INFO_NULL, &local));
  VK_CHECK(MPI, MPI_Comm_rank(local, &g_world.local_rank));
  VK_CHECK(MPI, MPI_Comm_size(local, &g_world.local_size));
  VK_CHECK(MPI, MPI_Comm_free(&local));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  g_world.host = host;
  check_launcher_size("SLURM_NTASKS", "SLURM_PROCID", g_world.size);
  check_launcher_size("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", g_world.size);
  return g_world;
}

void finalize_world() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

const World& world() { return g_world; }

void barrier() { VK_CHECK(MPI, MPI_Barrier(MPI_COMM_WORLD)); }

double allreduce_sum(double v) {
  double out = 0;
  VK_CHECK(MPI, MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return out;
}
int64_t allreduce_sum(int64_t v) {
  int64_t out = 0;
  VK_CHECK(MPI, MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  return out;
}
int64_t allreduce_min(int64_t v) {
  int64_t out = 0;
  VK_CHECK(MPI, MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD));
  return out;
}
std::vector<double> allgatherv(const std::vector<double>& mine) {
  const int P = g_world.size;
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(P), displs(P, 0);
  VK_CHECK(MPI, MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD));
  for (int r = 1; r < P; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<double> all(static_cast<size_t>(displs[P - 1] + counts[P - 1]));
  VK_CHECK(MPI, MPI_Allgatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                               MPI_DOUBLE, MPI_COMM_WORLD));
  return all;
}
double allreduce_max(double v) {
  double out = 0;
  VK_CHECK(MPI, MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}
void allreduce_sum_inplace(float* data, int64_t count) {
  VK_CHECK(MPI, MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD));
}
void allreduce_sum_inplace(double* data, int64_t count) {
  VK_CHECK(MPI, MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_DOUBLE, MPI_SUM,
                              MPI_COMM_WORLD));
}
void broadcast_bytes(void* data, int64_t bytes, int root) {
  VK_CHECK(MPI, MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
}

std::string broadcast_string(const std::string& mine) {
  int64_t n = static_cast<int64_t>(mine.size());
  broadcast_bytes(&n, sizeof n, 0);
  std::string s = world().root() ? mine : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) broadcast_bytes(&s[0], n, 0);
  return s;
}
std::vector<double> allgather(double v) {
  std::vector<double> out(g_world.size);
  VK_CHECK(MPI, MPI_Allgather(&v, 1, MPI_DOUBLE, out.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD));
  return out;
}

void log0(const char* fmt, ...) {
  if (g_world.rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stdout, fmt, ap);
  va_end(ap);
  std::fflush(stdout);
}

}  // namespace vitkd
