#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

namespace {
bool sync_path(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return false;
  int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0 && (err == EINVAL || err == EROFS || err == ENOTSUP)) rc = 0;  // nothing to sync there
  errno = err;
  return rc == 0;
}
}  // namespace

bool sync_file(const std::string& path) { return sync_path(path, O_RDONLY); }
bool sync_dir(const std::string& dir) { return sync_path(dir, O_RDONLY | O_DIRECTORY); }

}  // namespace vitkd
