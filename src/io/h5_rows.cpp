// Scattered rows of a dataset whose first axis is the sample axis, read or
// written with one HDF5 transfer each (io/h5.hpp: h5_read_rows, h5_write_rows).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {
namespace {

/// The dataset's file space with `rows` (sorted ascending) selected, whole
/// rows of the other axes, consecutive rows coalesced into one hyperslab each.
H5Obj select_row_union(hid_t dset, const std::vector<int64_t>& rows) {
  H5Obj fspace(VK_CHECK(H5, H5Dget_space(dset)));
  const int nd = VK_CHECK(H5, H5Sget_simple_extent_ndims(fspace));
  std::vector<hsize_t> dims(nd), start(nd, 0), count(nd);
  VK_CHECK(H5, H5Sget_simple_extent_dims(fspace, dims.data(), nullptr));
  for (int i = 1; i < nd; ++i) count[i] = dims[i];
  if (rows.front() < 0 || static_cast<hsize_t>(rows.back()) >= dims[0])
    throw RuntimeError("HDF5 rows " + std::to_string(rows.front()) + ".." + std::to_string(rows.back()) +
                       " are outside a dataset of " + std::to_string(dims[0]) + " rows");
  bool first = true;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;  // coalesce a run
    start[0] = static_cast<hsize_t>(rows[i]);
    count[0] = static_cast<hsize_t>(j - i);
    VK_CHECK(H5, H5Sselect_hyperslab(fspace, first ? H5S_SELECT_SET : H5S_SELECT_OR, start.data(), nullptr,
                                     count.data(), nullptr));
    first = false;
    i = j;
  }
  return fspace;
}

}  // namespace

template <class T>
void h5_read_rows(hid_t dset, const std::vector<int64_t>& rows, int64_t row_elems, T* out) {
  if (rows.empty()) return;
  H5Obj fspace = select_row_union(dset, rows);
  hsize_t total = static_cast<hsize_t>(rows.size() * row_elems);
  H5Obj mspace(VK_CHECK(H5, H5Screate_simple(1, &total, nullptr)));
  VK_CHECK(H5, H5Dread(dset, h5_type<T>(), mspace, fspace, H5P_DEFAULT, out));
}

template <class T>
void h5_write_rows(hid_t dset, const std::vector<int64_t>& rows, int64_t row_elems, const T* data) {
  if (rows.empty()) return;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i] <= rows[i - 1]) throw RuntimeError("h5_write_rows: rows not sorted ascending and distinct");
  H5Obj fspace = select_row_union(dset, rows);
  hsize_t total = static_cast<hsize_t>(rows.size() * row_elems);
  H5Obj mspace(VK_CHECK(H5, H5Screate_simple(1, &total, nullptr)));
  VK_CHECK(H5, H5Dwrite(dset, h5_type<T>(), mspace, fspace, H5P_DEFAULT, data));
}

void h5_read_ranges(hid_t dset, const std::vector<std::pair<int64_t, int64_t>>& ranges, uint8_t* out) {
  H5Obj fspace(VK_CHECK(H5, H5Dget_space(dset)));
  hsize_t size = 0;
  VK_CHECK(H5, H5Sget_simple_extent_dims(fspace, &size, nullptr));
  hsize_t total = 0;
  bool first = true;
  for (size_t i = 0; i < ranges.size();) {
    int64_t end = ranges[i].second;
    size_t j = i + 1;
    for (; j < ranges.size() && ranges[j].first == end; ++j) end = ranges[j].second;  // coalesce a run
    const int64_t begin = ranges[i].first;
    if (begin < 0 || end < begin || static_cast<hsize_t>(end) > size || (i > 0 && begin < ranges[i - 1].second))
      throw RuntimeError("HDF5 byte range " + std::to_string(begin) + ".." + std::to_string(end) +
                         " is outside a dataset of " + std::to_string(size) + " elements or out of order");
    const hsize_t start = static_cast<hsize_t>(begin), count = static_cast<hsize_t>(end - begin);
    i = j;
    if (count == 0) continue;
    VK_CHECK(H5, H5Sselect_hyperslab(fspace, first ? H5S_SELECT_SET : H5S_SELECT_OR, &start, nullptr, &count,
                                     nullptr));
    first = false;
    total += count;
  }
  if (total == 0) return;
  H5Obj mspace(VK_CHECK(H5, H5Screate_simple(1, &total, nullptr)));
  VK_CHECK(H5, H5Dread(dset, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, out));
}

#define VITKD_H5_ROWS_INSTANTIATE(T)                                                \
  template void h5_read_rows<T>(hid_t, const std::vector<int64_t>&, int64_t, T*); \
  template void h5_write_rows<T>(hid_t, const std::vector<int64_t>&, int64_t, const T*);
VITKD_H5_ROWS_INSTANTIATE(uint8_t)
VITKD_H5_ROWS_INSTANTIATE(uint16_t)
VITKD_H5_ROWS_INSTANTIATE(int16_t)
VITKD_H5_ROWS_INSTANTIATE(int32_t)
VITKD_H5_ROWS_INSTANTIATE(int64_t)
VITKD_H5_ROWS_INSTANTIATE(float)
VITKD_H5_ROWS_INSTANTIATE(double)
#undef VITKD_H5_ROWS_INSTANTIATE

}  // namespace vitkd
