#pragma once
#include <string>

namespace vitkd {
/// mkdir -p; returns false (errno set) if the directory cannot be made.
bool make_dirs(const std::string& dir);
/// The directory part of a path ("." if none).
std::string parent_dir(const std::string& path);
}  // namespace vitkd
