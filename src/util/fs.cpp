#include "util/fs.hpp"

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace vitkd {

bool make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    errno = ec.value();
    return false;
  }
  if (std::filesystem::is_directory(dir, ec)) return true;
  errno = ec ? ec.value() : ENOTDIR;
  return false;
}

std::string parent_dir(const std::string& path) {
  const std::string p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

}  // namespace vitkd
