#include "util/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace vitkd {

bool make_dirs(const std::string& dir) {
  std::string partial;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if ((i == dir.size() || dir[i] == '/') && !partial.empty()) {
      if (mkdir(partial.c_str(), 0775) != 0 && errno != EEXIST) return false;
    }
    if (i < dir.size()) partial += dir[i];
  }
  struct stat st;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string parent_dir(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  return pos == 0 ? "/" : path.substr(0, pos);
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
