#pragma once
// `vitkd train`: the training loop for both modes (teacher, distill).
#include "config/config.hpp"

namespace vitkd {

/// Runs one training job; every rank calls it. Returns the exit code.
int train_main(const Config& cfg, const std::string& config_origin);

}  // namespace vitkd
