#pragma once
#include <string>

namespace vitkd {
/// mkdir -p; returns false (errno set) if the directory cannot be made.
bool make_dirs(const std::string& dir);
/// The directory part of a path ("." if none).
std::string parent_dir(const std::string& path);
/// fsync of a file (its data and size reach the disk); false (errno set) on
/// an I/O error. File systems that cannot sync (EINVAL, EROFS) count as synced.
bool sync_file(const std::string& path);
/// fsync of a directory, so that a rename or link within it survives a crash;
/// false (errno set) on an I/O error (EINVAL, EROFS, ENOTSUP: as sync_file).
bool sync_dir(const std::string& dir);
}  // namespace vitkd
