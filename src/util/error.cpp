#include "util/error.hpp"

#include <hdf5.h>
#include <mpi.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace vitkd {

namespace {
int world_rank_or_zero(int* size) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  *size = 1;
  if (!init || fin) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return rank;
}

void print_error(int rank, bool with_rank, const std::string& msg) {
  if (with_rank) std::fprintf(stderr, "vitkd: error [rank %d]: %s\n", rank, msg.c_str());
  else std::fprintf(stderr, "vitkd: error: %s\n", msg.c_str());
  std::fflush(stderr);
}

// FNV-1a: equal messages on every rank give equal values.
uint64_t message_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Every rank arrives within this time when all of them detected the same
// error at the same point (they did the same work since the last collective,
// so they are apart by far less, even oversubscribed). A rank that failed
// alone waits this long before it prints and aborts the job.
constexpr auto kCollectiveWait = std::chrono::seconds(5);

// A launcher forwards each rank's output on its own schedule, and MPI_Abort
// may tear the job down before it has: under MPICH's Hydra the message of a
// rank that failed alone was sometimes lost entirely. The aborting rank
// waits this long after printing, which the launcher needs at most
// milliseconds for, even on an oversubscribed node.
constexpr auto kForwardWait = std::chrono::seconds(1);

[[noreturn]] void abort_job(int code) {
  std::this_thread::sleep_for(kForwardWait);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; if it did, the rank still ends
}
}  // namespace

void die(int code, const std::string& msg, bool collective) {
  int size = 1;
  const int rank = world_rank_or_zero(&size);
  // Rank 0 of a collective error and every rank of a local one print at once.
  if (!collective || rank == 0) print_error(rank, size > 1 && !collective, msg);
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef VITKD_FUZZING
  // Fuzz targets (tests/fuzz): code under test must throw, never end the
  // process; abort so that libFuzzer reports it and keeps the input.
  std::abort();
#endif
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) {
    if (size > 1 && collective) {
      // Only die() starts an MPI_Ibarrier, so it completes exactly when every
      // rank is here.
      MPI_Request req;
      int done = 0;
      if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS) {
        const auto t0 = std::chrono::steady_clock::now();
        while (!done && std::chrono::steady_clock::now() - t0 < kCollectiveWait) {
          MPI_Test(&req, &done, MPI_STATUS_IGNORE);
          if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
      if (!done) {
        // Not every rank failed: this error was this rank's alone, and rank 0,
        // which would have printed it, never saw it.
        if (rank != 0) print_error(rank, true, msg);
        abort_job(code);
      }
      // Every rank failed. Usually with the same message, printed by rank 0;
      // a message rank 0 did not have is printed by the lowest rank with it.
      std::vector<uint64_t> hashes(static_cast<size_t>(size));
      const uint64_t mine = message_hash(msg);
      MPI_Allgather(&mine, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
      if (std::find(hashes.begin(), hashes.begin() + rank, mine) == hashes.begin() + rank && rank != 0)
        print_error(rank, true, msg);
    } else if (size > 1) {
      abort_job(code);
    }
    MPI_Finalize();
  }
  std::_Exit(code);
}

void warn(const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.insert(msg).second) return;
  // One call, so that lines from several ranks do not interleave.
  std::fprintf(stderr, "vitkd: warning: %s\n", msg.c_str());
  std::fflush(stderr);
}

void check_failed(const char* lib, const char* expr, const char* file, int line,
                  const std::string& detail) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%s:%d: %s call failed: %s: %s", file, line, lib, expr,
                detail.c_str());
  die(kExitRuntime, buf);
}

int check_MPI(int rc, const char* expr, const char* file, int line) {
  if (rc == MPI_SUCCESS) return rc;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  check_failed("MPI", expr, file, line, std::string(msg, len));
}

namespace {
// Collects the outermost (API) and innermost (where the error was detected)
// entries of the HDF5 error stack.
struct H5StackEnds {
  std::string outer, inner;
};
herr_t walk_ends(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<H5StackEnds*>(data);
  if (!err || !err->desc) return 0;
  std::string e = std::string(err->desc) + (err->func_name ? std::string(" (in ") + err->func_name + ")" : "");
  if (n == 0) out->outer = e;  // H5E_WALK_DOWNWARD starts at the API call
  out->inner = e;              // ... and ends where the error was detected
  return 0;
}
}  // namespace

std::string h5_error_message() {
  H5StackEnds ends;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_ends, &ends);
  if (ends.outer.empty()) return "unknown HDF5 error";
  if (ends.inner == ends.outer) return ends.outer;
  return ends.outer + ": " + ends.inner;
}

long long check_H5(long long rc, const char* expr, const char* file, int line) {
  if (rc >= 0) return rc;
  check_failed("HDF5", expr, file, line, h5_error_message());
}

bool check_FILE(bool ok, const char* expr, const char* file, int line) {
  if (ok) return ok;
  check_failed("file", expr, file, line, std::strerror(errno));
}

int check_ZLIB(int rc, const char* expr, const char* file, int line) {
  if (rc >= 0) return rc;
  check_failed("zlib", expr, file, line, zError(rc));
}

}  // namespace vitkd
