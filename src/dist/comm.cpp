#include "dist/comm.hpp"

#include <mpi.h>

#include "dist/world.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  std::string name() const override { return "mpi"; }

  void reduce_scatter_avg(const float* send, float* recv, int64_t count) override {
    const int P = world().size;
    VK_CHECK(MPI, MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                           MPI_COMM_WORLD));
    const float inv = 1.0f / static_cast<float>(P);
    for (int64_t i = 0; i < count; ++i) recv[i] *= inv;
    bytes_sent_ += static_cast<int64_t>(P - 1) * count * static_cast<int64_t>(sizeof(float));
  }

  void all_gather(float* buf, int64_t count) override {
    const int P = world().size;
    VK_CHECK(MPI, MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(count),
                                MPI_FLOAT, MPI_COMM_WORLD));
    bytes_sent_ += static_cast<int64_t>(P - 1) * count * static_cast<int64_t>(sizeof(float));
  }
};

}  // namespace

std::unique_ptr<Communicator> make_communicator(const std::string& backend) {
  if (backend == "mpi" || backend == "auto") return std::make_unique<MpiCommunicator>();
  throw UserError("dist.backend = \"" + backend + "\" is not available in this build; use \"mpi\"");
}

}  // namespace vitkd
