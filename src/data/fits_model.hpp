#pragma once
// The one check that a model shape can read a dataset (used for the trained
// model, the teacher checkpoint and `vitkd export --data`).
#include <string>

#include "data/dataset.hpp"
#include "data/transforms/transforms.hpp"
#include "model/vit.hpp"

namespace vitkd {

/// Square images of spec.image_size pixels, spec.channels channels and
/// spec.classes classes, or one UserError line
///   "WHO: PREFIXimage_size = 16 but the images in PATH are 8x8; FIX"
/// `key_prefix` names the fields as the user sets them (e.g. "model.");
/// an empty `fix` says "set it to <the dataset's value>". `view_side` > 0:
/// the model reads views of that side cut from the stored images (the
/// student's model.image_size; data/transforms), not the stored images.
void check_spec_fits_data(const ModelSpec& spec, const DatasetMeta& meta, const std::string& who,
                          const std::string& key_prefix, const std::string& fix = "", int64_t view_side = 0);

/// The views of `aug` can be cut from the images of `meta`, or one UserError
/// line saying what to store: the pad crop needs images stored at the output
/// size, the evaluation view (and so every transform but the random-resized
/// crop) images at least that large.
void check_views_fit(const AugmentSpec& aug, const DatasetMeta& meta);

}  // namespace vitkd
