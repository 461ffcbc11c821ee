#include "util/fs.hpp"

#include <sys/stat.h>

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

}  // namespace vitkd
