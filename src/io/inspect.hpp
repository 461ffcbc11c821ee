#pragma once
// `vitkd inspect FILE.h5`: a short, human-readable summary of any vitkd file
// (dataset, checkpoint, timing log), chosen by its /format attribute; other
// HDF5 files get a listing of their top-level objects.
#include <string>
#include <vector>

namespace vitkd {

/// Entry point of the `inspect` subcommand (rank 0 prints). Exit code.
int inspect_main(const std::vector<std::string>& args);

}  // namespace vitkd
