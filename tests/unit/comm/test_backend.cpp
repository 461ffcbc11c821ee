// The gradient backends' registry and the one rule that picks a backend
// (comm/backend.hpp), and what select_device takes from the ranks' GPU keys
// (comm/device.hpp): with stubbed keys, device kinds and builds, so no GPU is
// needed.
#include <gtest/gtest.h>

#include <vector>

#include "comm/backend.hpp"
#include "comm/device.hpp"
#include "util/error.hpp"

using vitkd::Backend;
using vitkd::BackendTraits;

namespace {

// A build's registry for the rule's tests: this vitkd's Local and MPI, and,
// where `gpu_backend`, a GPU backend that declares what NCCL declares
// (BackendTraits.NcclDeclaresAGpuBackend checks that against the real one
// where NCCL is built).
std::vector<BackendTraits> build(bool gpu_backend) {
  std::vector<BackendTraits> v{*vitkd::built_backend(Backend::Local), *vitkd::built_backend(Backend::Mpi)};
  if (gpu_backend) {
    BackendTraits t;
    t.id = Backend::Nccl;
    t.needs_cuda = t.one_gpu_per_rank = true;
    t.auto_preference = 10;
    t.make = vitkd::built_backend(Backend::Mpi)->make;  // never called here
    v.push_back(t);
  }
  return v;
}

Backend resolve(Backend b, bool cuda, bool gpu_backend, int64_t sharing, int64_t world, std::string* note = nullptr) {
  return vitkd::resolve_backend(build(gpu_backend), b, cuda, sharing, world, note);
}

}  // namespace

TEST(BackendTraits, LocalAndMpiAreAlwaysBuiltAndNcclDeclaresAGpuBackend) {
  const BackendTraits* local = vitkd::built_backend(Backend::Local);
  const BackendTraits* mpi = vitkd::built_backend(Backend::Mpi);
  ASSERT_TRUE(local && mpi);
  EXPECT_TRUE(mpi->local_at_one_rank);
  EXPECT_FALSE(mpi->needs_cuda);
  EXPECT_EQ(vitkd::built_backends().front().id, Backend::Local);
  EXPECT_NE(vitkd::built_backend_words().find("mpi"), std::string::npos);
  const BackendTraits* nccl = vitkd::built_backend(Backend::Nccl);
  if (!nccl) GTEST_SKIP() << "this vitkd was built without NCCL (" << vitkd::built_backend_words() << ")";
  EXPECT_TRUE(nccl->needs_cuda);
  EXPECT_TRUE(nccl->one_gpu_per_rank);
  EXPECT_FALSE(nccl->local_at_one_rank);
  EXPECT_GT(nccl->auto_preference, mpi->auto_preference);
}

TEST(BackendTraits, ACpuBufferIsRefusedByAGpuBackendAndAnUnbuiltOneIsNamed) {
  if (vitkd::built_backend(Backend::Nccl)) {
    try {
      vitkd::make_communicator(Backend::Nccl);
      FAIL() << "no UserError";
    } catch (const vitkd::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("needs the buffers on a CUDA device"), std::string::npos) << e.what();
    }
  }
  const std::string m = vitkd::backend_not_built_message(Backend::Nccl);
  EXPECT_NE(m.find("built without NCCL"), std::string::npos) << m;
  EXPECT_NE(m.find("-DVITKD_WITH_NCCL=ON"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(DeviceChoice, RanksSharingCountsEqualGpuKeys) {
  // Four ranks: 0 and 2 on GPU "a", 1 on "b", 3 on "c".
  const std::vector<double> keys = {11.0, 22.0, 11.0, 33.0};
  EXPECT_EQ(vitkd::ranks_sharing(keys, 11.0), 2);
  EXPECT_EQ(vitkd::ranks_sharing(keys, 22.0), 1);
  EXPECT_EQ(vitkd::ranks_sharing(keys, 33.0), 1);
}

TEST(DeviceChoice, AutoFallsBackToMpiInOneLineWhenRanksShareAGpu) {
  std::string note;
  // One rank per GPU, NCCL built: NCCL, silently.
  EXPECT_EQ(resolve(Backend::Auto, /*cuda=*/true, /*gpu_backend=*/true, 1, /*world=*/4, &note), Backend::Nccl);
  EXPECT_TRUE(note.empty());
  // Two ranks on one GPU: MPI, and one line that says why.
  EXPECT_EQ(resolve(Backend::Auto, true, true, 2, 4, &note), Backend::Mpi);
  EXPECT_NE(note.find("dist.backend = \"auto\""), std::string::npos) << note;
  EXPECT_NE(note.find("2 ranks share one GPU"), std::string::npos) << note;
  EXPECT_NE(note.find("NCCL needs one GPU per rank"), std::string::npos) << note;
  EXPECT_NE(note.find("MPI"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos) << note;
  // The CPU, or a build without NCCL: MPI without a note.
  EXPECT_EQ(resolve(Backend::Auto, false, true, 1, 4, &note), Backend::Mpi);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(resolve(Backend::Auto, true, false, 2, 4, &note), Backend::Mpi);
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(resolve(Backend::Mpi, true, true, 2, 4, &note), Backend::Mpi);
  EXPECT_TRUE(note.empty());
}

TEST(DeviceChoice, OneRankTalksToNobodyUnlessNcclIsAskedForByName) {
  std::string note;
  for (bool cuda : {false, true})
    for (bool gpu_backend : {false, true}) {
      EXPECT_EQ(resolve(Backend::Auto, cuda, gpu_backend, 1, /*world=*/1, &note), Backend::Local);
      EXPECT_TRUE(note.empty()) << note;
      EXPECT_EQ(resolve(Backend::Mpi, cuda, gpu_backend, 1, 1, &note), Backend::Local);
    }
  // The one NCCL check at one rank: asked for by name, NCCL it is.
  EXPECT_EQ(resolve(Backend::Nccl, true, true, 1, 1), Backend::Nccl);
  // Two ranks are never "local".
  EXPECT_EQ(resolve(Backend::Auto, false, true, 1, 2), Backend::Mpi);
  EXPECT_EQ(resolve(Backend::Auto, true, true, 1, 2), Backend::Nccl);
}

TEST(DeviceChoice, NcclIsKeptWhereAskedAndRefusedInOneLineWithoutNccl) {
  // "nccl" stays "nccl" (select_device refuses it on a rank that shares its GPU).
  EXPECT_EQ(resolve(Backend::Nccl, true, true, 2, 4), Backend::Nccl);
  try {
    resolve(Backend::Nccl, true, /*gpu_backend=*/false, 1, 4);
    FAIL() << "no UserError";
  } catch (const vitkd::UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("built without NCCL"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}
