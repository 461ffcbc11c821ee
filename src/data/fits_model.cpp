#include "data/fits_model.hpp"

#include "util/error.hpp"

namespace vitkd {

void check_spec_fits_data(const ModelSpec& s, const DatasetMeta& m, const std::string& who,
                          const std::string& key_prefix, const std::string& fix) {
  auto n = [](int64_t v) { return std::to_string(v); };
  auto fail = [&](const char* key, int64_t have, const std::string& data_has, int64_t want) {
    throw UserError(who + ": " + key_prefix + key + " = " + n(have) + " but " + data_has + "; " +
                    (fix.empty() ? "set it to " + n(want) : fix));
  };
  if (m.height != m.width)
    throw UserError(m.path + ": images are " + n(m.height) + "x" + n(m.width) +
                    "; vitkd needs square images");
  if (s.image_size != m.height)
    fail("image_size", s.image_size,
         "the images in " + m.path + " are " + n(m.height) + "x" + n(m.width), m.height);
  if (s.channels != m.channels)
    fail("channels", s.channels, m.path + " has " + n(m.channels) + " channels", m.channels);
  if (s.classes != m.num_classes)
    fail("classes", s.classes, m.path + " has " + n(m.num_classes) + " classes", m.num_classes);
}

}  // namespace vitkd
