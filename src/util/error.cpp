#include "util/error.hpp"

#include <hdf5.h>
#include <mpi.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
}  // namespace

void die(int code, const std::string& msg, bool collective) {
  int size = 1;
  const int rank = world_rank_or_zero(&size);
  if (!collective || rank == 0) {
    if (size > 1 && !collective)
      std::fprintf(stderr, "vitkd: error [rank %d]: %s\n", rank, msg.c_str());
    else
      std::fprintf(stderr, "vitkd: error: %s\n", msg.c_str());
  }
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
      MPI_Request req;
      int done = 0;
      if (MPI_Ibarrier(MPI_COMM_WORLD, &req) == MPI_SUCCESS) {
        const auto t0 = std::chrono::steady_clock::now();
        while (!done && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
          MPI_Test(&req, &done, MPI_STATUS_IGNORE);
          if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
      if (!done) MPI_Abort(MPI_COMM_WORLD, code);
    } else if (size > 1) {
      MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Finalize();
  }
  std::_Exit(code);
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
