#include "data/fits_model.hpp"

#include "util/error.hpp"

namespace vitkd {
namespace {
std::string n(int64_t v) { return std::to_string(v); }  // for messages
}  // namespace

void check_spec_fits_data(const ModelSpec& s, const DatasetMeta& m, const std::string& who,
                          const std::string& key_prefix, const std::string& fix, int64_t view_side) {
  auto fail = [&](const char* key, int64_t have, const std::string& data_has, int64_t want) {
    throw UserError(who + ": " + key_prefix + key + " = " + n(have) + " but " + data_has + "; " +
                    (fix.empty() ? "set it to " + n(want) : fix));
  };
  if (m.height != m.width)
    throw UserError(m.path + ": images are " + n(m.height) + "x" + n(m.width) +
                    "; vitkd needs square images");
  if (view_side > 0 && s.image_size != view_side)
    fail("image_size", s.image_size,
         "the images it reads, the model.image_size views of " + m.path + ", are " + n(view_side) + "x" +
             n(view_side), view_side);
  if (view_side <= 0 && s.image_size != m.height)
    fail("image_size", s.image_size,
         "the images in " + m.path + " are " + n(m.height) + "x" + n(m.width), m.height);
  if (s.channels != m.channels)
    fail("channels", s.channels, m.path + " has " + n(m.channels) + " channels", m.channels);
  if (s.classes != m.num_classes)
    fail("classes", s.classes, m.path + " has " + n(m.num_classes) + " classes", m.num_classes);
}

void check_views_fit(const AugmentSpec& aug, const DatasetMeta& m) {
  const int64_t s = output_side(aug, m.height);
  const std::string stored = n(m.height) + "x" + n(m.width);
  if (aug.enabled && aug.crop == CropKind::Pad && (m.height != s || m.width != s))
    throw UserError(m.path + ": images are stored at " + stored + " and model.image_size is " + n(s) +
                    "; the pad crop (" + setting_text("data.crop", CropKind::Pad) +
                    ") keeps the stored size: store them at " + n(s) + " (`vitkd prepare folder --size " + n(s) +
                    "`) or set " + setting_text("data.crop", CropKind::RandomResized));
  if (!(aug.enabled && aug.crop == CropKind::RandomResized) && (m.height < s || m.width < s))
    throw UserError(m.path + ": images are stored at " + stored + ", smaller than model.image_size = " + n(s) +
                    "; without the random-resized crop the views are cut from the stored images: store them "
                    "at " + n(s) + " or more (`vitkd prepare folder --size " + n(s * 8 / 7) +
                    "` for the evaluation crop of data.crop_pct = 0.875), or set " +
                    setting_text("data.crop", CropKind::RandomResized));
}

}  // namespace vitkd
