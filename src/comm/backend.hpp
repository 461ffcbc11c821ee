#pragma once
// The gradient backends (dist.backend) and how a run picks one.
//
// Each backend lives in one file, src/comm/<word>_backend.cpp, which defines
// its Communicator and a function `void register_<word>_backend()` that calls
// register_backend() with its traits. The build compiles a backend's file when
// its CMake module (cmake/backends/<word>.cmake, where it has one) finds what
// it needs, and generates the call of every compiled backend's register
// function (generated/backends.cpp); nothing else names a backend. Its word
// is a row of dist.backend's choices (config/choices.cpp), like every option's.
//
// Resolution (resolve_backend) is one rule over the traits: at one rank the
// Local backend unless a backend that talks to itself is named; "auto" takes
// the built backend of highest preference that serves the run's device and
// GPU sharing; a named backend must be built and serve the device.
#include <memory>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "config/choices.hpp"

namespace vitkd {

/// What a backend declares of itself when it registers.
struct BackendTraits {
  Backend id = Backend::Mpi;
  /// Its collectives take device memory only: refused on the CPU.
  bool needs_cuda = false;
  /// It refuses two ranks on one GPU (NCCL does).
  bool one_gpu_per_rank = false;
  /// At one rank its result is the Local backend's, bit for bit (MPI's is):
  /// a one-rank run asking for it runs Local. A backend without this keeps
  /// itself at one rank when named, so that it can be checked alone.
  bool local_at_one_rank = false;
  /// "auto" takes, among the built backends that serve a run, the one with
  /// the highest preference (MPI 0, NCCL 10).
  int auto_preference = 0;
  /// Its communicator on the run's buffers (`where`); for needs_cuda
  /// backends the device is a CUDA device and current.
  std::unique_ptr<Communicator> (*make)(const CommPlacement& where) = nullptr;
};

/// Adds a backend to the registry (its register_<word>_backend() calls it).
void register_backend(const BackendTraits& traits);
/// The traits of the backends built into this vitkd, Local first, then in
/// the order they registered.
const std::vector<BackendTraits>& built_backends();
/// The traits of `b` when it is built into this vitkd, else null.
const BackendTraits* built_backend(Backend b);
/// The built backends' words, joined by ", " (the version line).
std::string built_backend_words();

/// The backend as prose names it: its word in capitals ("MPI", "NCCL").
std::string backend_label(Backend b);

/// The one line for a backend named in the configuration that this vitkd
/// was built without: its word, the CMake option that builds it, and "mpi".
std::string backend_not_built_message(Backend b);

/// The resolved dist.backend among `built` (the registry's, or a test's)
/// for `backend` on a CUDA (`cuda`) or CPU run of `world_size` ranks, where
/// `most_sharing` is the most ranks that share one GPU anywhere in the job.
/// One rank: Local, unless a backend without local_at_one_rank is named.
/// Auto: the built backend of highest auto_preference that serves the device
/// (needs_cuda only on CUDA) and the sharing (one_gpu_per_rank only with one
/// rank per GPU); when one was passed over only because ranks share a GPU,
/// `note` gets the one line that says so. A named backend not built:
/// UserError (backend_not_built_message). A named backend is kept otherwise;
/// select_device refuses it on the CPU (needs_cuda) and on a rank that
/// shares its GPU (one_gpu_per_rank).
Backend resolve_backend(const std::vector<BackendTraits>& built, Backend backend, bool cuda,
                        int64_t most_sharing, int64_t world_size, std::string* note = nullptr);
/// The same over this vitkd's built backends.
Backend resolve_backend(Backend backend, bool cuda, int64_t most_sharing, int64_t world_size,
                        std::string* note = nullptr);

}  // namespace vitkd
