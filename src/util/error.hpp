#pragma once
// One error path for the whole program.
//
//  * VK_CHECK(LIB, call) checks a library call (LIB = MPI, H5, FILE, ZLIB,
//    CUDA, NCCL). On failure it reports file:line, the call, and the library's
//    own message, then aborts every rank (MPI_Abort). Internal failures only.
//  * vitkd::UserError is thrown for mistakes the user can fix (configuration,
//    data, command line). main() turns it into one line and exit code 2.
//  * vitkd::die() is the single place that prints errors and ends the
//    program; vitkd::warn() the single place for warnings that go on.
#include <stdexcept>
#include <string>

namespace vitkd {

/// Exit codes (documented in the README).
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,   ///< runtime failure (I/O, library, numerics)
  kExitUser = 2,      ///< user error: usage, configuration, data
  kExitPreempted = 75 ///< checkpointed after SIGTERM/SIGUSR1; requeue (EX_TEMPFAIL)
};

/// A mistake the user can fix. `what()` is the whole one-line message:
/// what is wrong, where (file, dataset, key) and how to fix it.
/// `collective` is true when every rank detects the same error at the same
/// point (configuration, dataset layout); then only rank 0 prints it.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg, bool collective = true)
      : std::runtime_error(msg), collective_(collective) {}
  bool collective() const { return collective_; }

 private:
  bool collective_;
};

/// A runtime failure that is not the user's fault but is still reported as
/// one clean line (e.g. a file system error while writing a checkpoint).
/// `collective` as for UserError (e.g. every rank saw the same non-finite
/// gradient norm).
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& msg, bool collective = false)
      : std::runtime_error(msg), collective_(collective) {}
  bool collective() const { return collective_; }

 private:
  bool collective_;
};

/// Prints "vitkd: error: <msg>" (prefixed with the rank when the world has
/// more than one), flushes, and ends all ranks with exit code `code`. The
/// message reaches the user exactly once:
///  * `collective` = false: this rank prints "vitkd: error [rank r]: ..." and,
///    1 s later (for the launcher to forward the line), MPI_Abort ends every
///    rank.
///  * `collective` = true (every rank should find the same error at the same
///    point): rank 0 prints at once; the ranks meet in a barrier with a 5 s
///    limit (MPI_Ibarrier). If all arrive they leave through MPI_Finalize with
///    `code` (a rank whose message differs from rank 0's prints it too). If
///    not, the error was not collective after all: a rank other than 0 prints
///    its message with its rank, then MPI_Abort (after the same 1 s) ends
///    every rank with `code`.
[[noreturn]] void die(int code, const std::string& msg, bool collective = false);

/// Prints "vitkd: warning: <msg>" on stderr from the calling rank, whichever
/// it is, once per distinct message in this process; never collective. For
/// what only some ranks see (e.g. an image file one rank could not decode).
void warn(const std::string& msg);

/// Called by VK_CHECK on failure.
[[noreturn]] void check_failed(const char* lib, const char* expr, const char* file,
                               int line, const std::string& detail);

// Per-library result checks; each returns the value so calls can be wrapped.
int check_MPI(int rc, const char* expr, const char* file, int line);
long long check_H5(long long rc, const char* expr, const char* file, int line);
bool check_FILE(bool ok, const char* expr, const char* file, int line);
int check_ZLIB(int rc, const char* expr, const char* file, int line);

/// The current HDF5 error stack in one line: the API call's message and the
/// innermost one (where the error was detected); "unknown HDF5 error" if empty.
std::string h5_error_message();

}  // namespace vitkd

/// Checks a library call; see the header comment. LIB is one of MPI, H5,
/// FILE (a boolean "succeeded" expression; errno supplies the message),
/// ZLIB, CUDA, NCCL.
#define VK_CHECK(LIB, ...) ::vitkd::check_##LIB((__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)
