// The format header every vitkd HDF5 file carries (io/h5.hpp, H5Format).
#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

void h5_write_format(hid_t file, const H5Format& fmt) {
  h5_attr_write(file, "format", std::string(fmt.name));
  h5_attr_write(file, "format_version", fmt.version);
}

void h5_require_format(hid_t file, const std::string& path, const H5Format& fmt) {
  for (const char* a : {"format", "format_version"})
    if (!h5_attr_exists(file, a))
      throw UserError(path + ": missing attribute '/" + std::string(a) + "' (not a vitkd " + fmt.what +
                      "?); " + fmt.fix);
  const std::string name = h5_attr_string(file, "format");
  if (name != fmt.name)
    throw UserError(path + ": not a vitkd " + fmt.what + " (attribute /format is '" + name +
                    "', expected '" + fmt.name + "'); " + fmt.fix);
  const int64_t v = h5_attr_int(file, "format_version");
  if (v != fmt.version)
    throw UserError(path + ": " + fmt.what + " format version " + std::to_string(v) +
                    " is not supported (this vitkd reads version " + std::to_string(fmt.version) +
                    "); " + fmt.fix);
}

}  // namespace vitkd
