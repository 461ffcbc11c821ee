#pragma once
// A training batch's inputs as the step and a resumed sample pool take them:
// the run's transform, or a teacher-view cache's replayed views, on the run's
// device.
#include <cstdint>

#include "data/loader.hpp"
#include "data/tensors.hpp"

namespace vitkd {

struct TrainSetup;

/// The training inputs of loader batch `b`: the run's transform, with the
/// teacher-view cache's views (the sample's and its partner's) when the run
/// replays one. `pinned` as for batch_input.
TrainInputs training_inputs(TrainSetup& s, const Batch& b, bool pinned = false);
/// training_inputs() on the run's device, normalized there when they crossed
/// as grey levels (plan.transfer). `host_bytes`: the bytes of the host-side
/// tensors (input and targets) that crossed.
TrainInputs device_inputs(TrainSetup& s, const Batch& b, int64_t* host_bytes = nullptr);

}  // namespace vitkd
