// The images of a dataset file, raw or JPEG-stored (data/image_store.hpp).
#include "data/image_store.hpp"

#include <algorithm>
#include <utility>

#include "comm/world.hpp"
#include "data/jpeg_codec.hpp"
#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

const H5Format& dataset_format_of(hid_t file) {
  if (h5_attr_exists(file, "format_version") && h5_attr_int(file, "format_version") == kDatasetJpegVersion)
    return kDatasetJpegH5;
  return kDatasetH5;
}

std::vector<int64_t> check_jpeg_split(hid_t f, const std::string& path, const std::string& split) {
  const std::string bytes = "/" + split + "/jpeg", offs = "/" + split + "/jpeg_offsets";
  const std::string fix = "; re-create it with `vitkd prepare folder --store jpeg`";
  for (const auto& d : {bytes, offs})
    if (!h5_exists(f, d)) throw UserError(path + ": missing dataset '" + d + "' of a JPEG-stored file" + fix);
  std::vector<int64_t> dims(4, 0);
  const char* shape[3] = {"image_height", "image_width", "image_channels"};
  for (int k = 0; k < 3; ++k) {
    if (!h5_attr_exists(f, shape[k]))
      throw UserError(path + ": missing attribute '/" + std::string(shape[k]) + "' of a JPEG-stored file" + fix);
    dims[k + 1] = h5_attr_int(f, shape[k]);
  }
  if (dims[3] != 1 && dims[3] != 3)
    throw UserError(path + ": attribute /image_channels is " + std::to_string(dims[3]) +
                    "; a JPEG-stored file holds 1 or 3 channels" + fix);
  const auto bi = h5_dataset_info(f, bytes), oi = h5_dataset_info(f, offs);
  if (bi.type_class != H5T_INTEGER || bi.type_size != 1 || bi.is_signed || bi.dims.size() != 1)
    throw UserError(path + ": dataset '" + bytes + "' is " + bi.describe() + ", expected uint8 [B]" + fix);
  if (oi.type_class != H5T_INTEGER || oi.type_size != 8 || !oi.is_signed || oi.dims.size() != 1 || oi.dims[0] < 1)
    throw UserError(path + ": dataset '" + offs + "' is " + oi.describe() + ", expected int64 [N+1]" + fix);
  dims[0] = oi.dims[0] - 1;
  // Ascending from 0 to B, block by block (memory bounded whatever N the file claims).
  constexpr int64_t kBlock = 1 << 16;
  std::vector<int64_t> o(static_cast<size_t>(std::min(kBlock, oi.dims[0])));
  int64_t prev = 0;
  for (int64_t b = 0; b < oi.dims[0]; b += kBlock) {
    const int64_t cnt = std::min(kBlock, oi.dims[0] - b);
    h5_read_slice(f, offs, b, cnt, o.data());
    for (int64_t j = 0; j < cnt; ++j) {
      const bool bad = (b + j == 0) ? o[j] != 0 : o[j] < prev;
      if (bad || o[j] > bi.dims[0])
        throw UserError(path + ": " + offs + "[" + std::to_string(b + j) + "] = " + std::to_string(o[j]) +
                        " is not an offset into '" + bytes + "' (" + std::to_string(bi.dims[0]) +
                        " bytes) after " + std::to_string(prev) + fix);
      prev = o[j];
    }
  }
  if (prev != bi.dims[0])
    throw UserError(path + ": the last of " + offs + " is " + std::to_string(prev) + " but '" + bytes + "' has " +
                    std::to_string(bi.dims[0]) + " bytes" + fix);
  return dims;
}

SplitImages::SplitImages(hid_t file, const DatasetMeta& meta, const std::string& split)
    : path_(meta.path), split_(split), jpeg_(meta.storage == kStorageJpeg), h_(meta.height), w_(meta.width),
      c_(meta.channels) {
  const std::string g = "/" + split;
  data_ = H5Obj(VK_CHECK(H5, H5Dopen2(file, (g + (jpeg_ ? "/jpeg" : "/images")).c_str(), H5P_DEFAULT)));
  if (jpeg_) offsets_ = H5Obj(VK_CHECK(H5, H5Dopen2(file, (g + "/jpeg_offsets").c_str(), H5P_DEFAULT)));
}

void SplitImages::read(const std::vector<int64_t>& rows, uint8_t* out, EncodedRows& enc) const {
  if (!jpeg_) return h5_read_rows(data_.get(), rows, h_ * w_ * c_, out);
  const int64_t n = static_cast<int64_t>(rows.size());
  enc.rows = rows;
  enc.starts.assign(static_cast<size_t>(n + 1), 0);
  if (n == 0) return enc.bytes.clear();
  // Offsets i and i + 1 of every row i: ascending, distinct.
  std::vector<int64_t> at;
  at.reserve(static_cast<size_t>(2 * n));
  for (int64_t i : rows) {
    if (at.empty() || at.back() != i) at.push_back(i);
    at.push_back(i + 1);
  }
  std::vector<int64_t> off(at.size());
  h5_read_rows(offsets_.get(), at, 1, off.data());
  std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const size_t j = static_cast<size_t>(std::lower_bound(at.begin(), at.end(), rows[k]) - at.begin());
    ranges[k] = {off[j], off[j + 1]};
    if (off[j + 1] < off[j])
      throw UserError(path_ + ": /" + split_ + "/jpeg_offsets is not ascending at sample " + std::to_string(rows[k]) +
                          "; the file is damaged: re-create it with `vitkd prepare folder --store jpeg`",
                      /*collective=*/false);
    enc.starts[k + 1] = enc.starts[k] + (off[j + 1] - off[j]);
  }
  enc.bytes.resize(static_cast<size_t>(enc.starts[n]));
  h5_read_ranges(data_.get(), ranges, enc.bytes.data());
}

void SplitImages::decode(const EncodedRows& enc, uint8_t* out) const {
  if (!jpeg_) return;
  const int64_t row = h_ * w_ * c_;
  for (size_t k = 0; k < enc.rows.size(); ++k) {
    const std::string why = jpeg_decode(enc.bytes.data() + enc.starts[k], enc.starts[k + 1] - enc.starts[k],
                                        h_, w_, c_, out + static_cast<int64_t>(k) * row);
    if (!why.empty())
      throw UserError(path_ + ": the JPEG bytes of /" + split_ + " sample " + std::to_string(enc.rows[k]) +
                          " do not decode (" + why + "); the file is damaged: copy it again or re-create it "
                          "with `vitkd prepare folder --store jpeg`",
                      /*collective=*/false);
  }
}

void SplitImages::read_decoded(const std::vector<int64_t>& rows, uint8_t* out) const {
  EncodedRows enc;
  read(rows, out, enc);
  decode(enc, out);
}

void write_jpeg_split(hid_t file, const std::string& split, int64_t first, int64_t total, int64_t byte_first,
                      int64_t byte_total, const std::vector<int64_t>& sizes, const std::vector<uint8_t>& bytes) {
  const World& w = world();
  const std::string g = "/" + split;
  H5Obj db = h5_create_dataset(file, g + "/jpeg", H5T_NATIVE_UINT8, {byte_total});
  h5_write_slab(db.get(), byte_first, static_cast<int64_t>(bytes.size()), bytes.data(), /*collective=*/true);
  // Each rank writes its samples' starts; the last rank also the end, off[N] = B.
  const int64_t n = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> offs(static_cast<size_t>(n) + 1, byte_first);
  for (int64_t k = 0; k < n; ++k) offs[k + 1] = offs[k] + sizes[k];
  const bool last = w.rank == w.size - 1;
  H5Obj dof = h5_create_dataset(file, g + "/jpeg_offsets", H5T_NATIVE_INT64, {total + 1});
  h5_write_slab(dof.get(), first, last ? n + 1 : n, offs.data(), /*collective=*/true);
}

void write_jpeg_attributes(hid_t file, int64_t h, int64_t w, int64_t c, int64_t quality) {
  h5_write_format(file, kDatasetJpegH5);
  h5_attr_write(file, "storage", std::string(kStorageJpeg));
  h5_attr_write(file, "jpeg_quality", quality);
  h5_attr_write(file, "image_height", h);
  h5_attr_write(file, "image_width", w);
  h5_attr_write(file, "image_channels", c);
}

}  // namespace vitkd
