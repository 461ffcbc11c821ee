#include "io/h5.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <sstream>

#include "util/error.hpp"
#include "util/fs.hpp"

namespace vitkd {

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

void h5_silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
/// The name of the file that `loc` (a file, group, dataset or attribute) lives in.
std::string file_of(hid_t loc) {
  ssize_t n = H5Fget_name(loc, nullptr, 0);
  if (n <= 0) return "HDF5 file";
  std::string s(static_cast<size_t>(n) + 1, '\0');
  H5Fget_name(loc, s.data(), s.size());
  s.resize(static_cast<size_t>(n));
  return s;
}
/// Checks an HDF5 call made while reading a file the user supplied. A failure
/// there means the file does not hold what vitkd expects (wrong type, corrupt
/// or truncated data), which the user can fix, so it is a UserError naming
/// the file and the object rather than an internal failure that aborts.
long long read_check(long long rc, hid_t loc, const std::string& what) {
  if (rc >= 0) return rc;
  const std::string err = h5_error_message();  // before any other HDF5 call clears the stack
  throw UserError(file_of(loc) + ": cannot read " + what + ": " + err +
                  " (corrupt, or not written by vitkd?); recreate the file");
}
}  // namespace

H5Obj& H5Obj::operator=(H5Obj&& o) noexcept {
  if (this != &o) {
    close();
    id_ = o.id_;
    o.id_ = -1;
  }
  return *this;
}

void H5Obj::close() {
  if (id_ < 0) return;
  hid_t id = id_;
  id_ = -1;
  switch (H5Iget_type(id)) {
    case H5I_FILE: VK_CHECK(H5, H5Fclose(id)); break;
    case H5I_GROUP: VK_CHECK(H5, H5Gclose(id)); break;
    case H5I_DATASET: VK_CHECK(H5, H5Dclose(id)); break;
    case H5I_DATASPACE: VK_CHECK(H5, H5Sclose(id)); break;
    case H5I_DATATYPE: VK_CHECK(H5, H5Tclose(id)); break;
    case H5I_ATTR: VK_CHECK(H5, H5Aclose(id)); break;
    case H5I_GENPROP_LST: VK_CHECK(H5, H5Pclose(id)); break;
    default: break;
  }
}

H5Obj h5_open_read(const std::string& path, const std::string& what) {
  if (access(path.c_str(), R_OK) != 0)
    throw UserError("cannot read " + what + " '" + path + "': " + std::strerror(errno) +
                    "; check the path");
  htri_t is = H5Fis_hdf5(path.c_str());
  if (is <= 0)
    throw UserError(what + " '" + path + "' is not a valid HDF5 file (truncated or corrupt?); "
                    "recreate it");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0)
    throw UserError("cannot open " + what + " '" + path + "': " + h5_error_message() +
                    " (truncated or corrupt?); recreate it");
  return H5Obj(f);
}

H5Obj h5_create(const std::string& path) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0)
    throw RuntimeError("cannot create HDF5 file '" + path + "': " + h5_error_message() +
                       "; check that the directory exists and is writable");
  return H5Obj(f);
}

H5Obj h5_create_parallel(const std::string& path) {
  H5Obj fapl(VK_CHECK(H5, H5Pcreate(H5P_FILE_ACCESS)));
  VK_CHECK(H5, H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (f < 0)
    throw RuntimeError("cannot create HDF5 file '" + path + "': " + h5_error_message() +
                       "; check that the directory exists and is writable");
  return H5Obj(f);
}

H5Obj h5_open_parallel(const std::string& path, bool write) {
  H5Obj fapl(VK_CHECK(H5, H5Pcreate(H5P_FILE_ACCESS)));
  VK_CHECK(H5, H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
  hid_t f = H5Fopen(path.c_str(), write ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
  if (f < 0)
    throw RuntimeError("cannot open HDF5 file '" + path + "': " + h5_error_message());
  return H5Obj(f);
}

bool h5_exists(hid_t loc, const std::string& path) {
  // Check each component so that a missing parent is not an error.
  std::string partial;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) { partial.assign(1, '/'); continue; }  // not = "/": GCC 12 false -Wstringop-overflow
    if (!partial.empty() && partial.back() != '/') partial += '/';
    partial += part;
    if (H5Lexists(loc, partial.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

H5Obj h5_group(hid_t file, const std::string& path) {
  if (h5_exists(file, path)) return H5Obj(VK_CHECK(H5, H5Gopen2(file, path.c_str(), H5P_DEFAULT)));
  H5Obj lcpl(VK_CHECK(H5, H5Pcreate(H5P_LINK_CREATE)));
  VK_CHECK(H5, H5Pset_create_intermediate_group(lcpl, 1));
  return H5Obj(VK_CHECK(H5, H5Gcreate2(file, path.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT)));
}

std::string H5DatasetInfo::describe() const {
  std::ostringstream o;
  if (type_class == H5T_INTEGER) o << (is_signed ? "int" : "uint") << type_size * 8;
  else if (type_class == H5T_FLOAT) o << "float" << type_size * 8;
  else o << "type-class-" << int(type_class);
  o << " [";
  for (size_t i = 0; i < dims.size(); ++i) o << (i ? "," : "") << dims[i];
  o << "]";
  return o.str();
}

H5DatasetInfo h5_dataset_info(hid_t file, const std::string& path) {
  const std::string what = "dataset '" + path + "'";
  hid_t did = H5Dopen2(file, path.c_str(), H5P_DEFAULT);
  if (did < 0) {
    const std::string err = h5_error_message();  // before H5Fget_name clears the stack
    throw UserError(file_of(file) + ": '" + path + "' is not a readable dataset (" + err +
                    "); recreate the file");
  }
  H5Obj d(did);
  H5Obj s(read_check(H5Dget_space(d), d, what));
  H5Obj t(read_check(H5Dget_type(d), d, what));
  int nd = static_cast<int>(read_check(H5Sget_simple_extent_ndims(s), d, what));
  std::vector<hsize_t> dims(nd);
  read_check(H5Sget_simple_extent_dims(s, dims.data(), nullptr), d, what);
  H5DatasetInfo info;
  info.dims.assign(dims.begin(), dims.end());
  info.type_class = H5Tget_class(t);
  info.type_size = H5Tget_size(t);
  info.is_signed = info.type_class == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_2;
  return info;
}

template <> hid_t h5_type<uint8_t>() { return H5T_NATIVE_UINT8; }
template <> hid_t h5_type<uint16_t>() { return H5T_NATIVE_UINT16; }
template <> hid_t h5_type<int16_t>() { return H5T_NATIVE_INT16; }
template <> hid_t h5_type<int32_t>() { return H5T_NATIVE_INT32; }
template <> hid_t h5_type<int64_t>() { return H5T_NATIVE_INT64; }
template <> hid_t h5_type<float>() { return H5T_NATIVE_FLOAT; }
template <> hid_t h5_type<double>() { return H5T_NATIVE_DOUBLE; }

template <class T>
void h5_write(hid_t loc, const std::string& path, const T* data, const std::vector<int64_t>& dims) {
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  H5Obj space(VK_CHECK(H5, H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr)));
  H5Obj lcpl(VK_CHECK(H5, H5Pcreate(H5P_LINK_CREATE)));
  VK_CHECK(H5, H5Pset_create_intermediate_group(lcpl, 1));
  H5Obj d(VK_CHECK(H5, H5Dcreate2(loc, path.c_str(), h5_type<T>(), space, lcpl, H5P_DEFAULT,
                                  H5P_DEFAULT)));
  int64_t n = 1;
  for (auto x : dims) n *= x;
  if (n > 0) VK_CHECK(H5, H5Dwrite(d, h5_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data));
  d.close();
}

template <class T> void h5_read(hid_t loc, const std::string& path, T* out, int64_t count) {
  const std::string what = "dataset '" + path + "'";
  H5Obj d(read_check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), loc, what));
  H5Obj s(read_check(H5Dget_space(d), d, what));
  int64_t n = read_check(H5Sget_simple_extent_npoints(s), d, what);
  if (n != count)
    throw UserError(file_of(loc) + ": dataset '" + path + "' has " + std::to_string(n) +
                    " elements, expected " + std::to_string(count));
  if (n > 0) read_check(H5Dread(d, h5_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out), d, what);
}

template <class T> void h5_read(hid_t loc, const std::string& path, std::vector<T>& out) {
  const std::string what = "dataset '" + path + "'";
  H5Obj d(read_check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), loc, what));
  H5Obj s(read_check(H5Dget_space(d), d, what));
  int64_t n = read_check(H5Sget_simple_extent_npoints(s), d, what);
  out.resize(n);
  if (n > 0)
    read_check(H5Dread(d, h5_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), d, what);
}

template <class T>
void h5_read_slice(hid_t loc, const std::string& path, int64_t start, int64_t count, T* out) {
  const std::string what = "dataset '" + path + "'";
  H5Obj d(read_check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), loc, what));
  H5Obj fs(read_check(H5Dget_space(d), d, what));
  if (read_check(H5Sget_simple_extent_ndims(fs), d, what) != 1)
    throw UserError(file_of(loc) + ": dataset '" + path + "' must be one-dimensional");
  hsize_t n = 0;
  read_check(H5Sget_simple_extent_dims(fs, &n, nullptr), d, what);
  if (start < 0 || count < 0 || static_cast<hsize_t>(start) > n ||
      static_cast<hsize_t>(count) > n - static_cast<hsize_t>(start))
    throw UserError(file_of(loc) + ": dataset '" + path + "' has " + std::to_string(n) +
                    " elements, fewer than the " + std::to_string(start + count) + " expected");
  if (count == 0) return;
  hsize_t st = static_cast<hsize_t>(start), ct = static_cast<hsize_t>(count);
  read_check(H5Sselect_hyperslab(fs, H5S_SELECT_SET, &st, nullptr, &ct, nullptr), d, what);
  H5Obj ms(VK_CHECK(H5, H5Screate_simple(1, &ct, nullptr)));
  read_check(H5Dread(d, h5_type<T>(), ms, fs, H5P_DEFAULT, out), d, what);
}

H5Obj h5_create_dataset(hid_t loc, const std::string& path, hid_t type,
                        const std::vector<int64_t>& dims) {
  return h5_create_dataset_chunked(loc, path, type, dims, 0);
}

H5Obj h5_create_dataset_chunked(hid_t loc, const std::string& path, hid_t type,
                                const std::vector<int64_t>& dims, int64_t chunk_rows) {
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  H5Obj space(VK_CHECK(H5, H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr)));
  H5Obj lcpl(VK_CHECK(H5, H5Pcreate(H5P_LINK_CREATE)));
  VK_CHECK(H5, H5Pset_create_intermediate_group(lcpl, 1));
  H5Obj dcpl(VK_CHECK(H5, H5Pcreate(H5P_DATASET_CREATE)));
  if (chunk_rows > 0) {
    std::vector<hsize_t> chunk(hd);
    chunk[0] = static_cast<hsize_t>(std::max<int64_t>(1, std::min<int64_t>(chunk_rows, dims[0])));
    VK_CHECK(H5, H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()));
  }
  return H5Obj(VK_CHECK(H5, H5Dcreate2(loc, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT)));
}

namespace {
// File and memory dataspaces selecting rows [first, first + count) of `dset`.
struct RowSelection {
  H5Obj file, mem;
};
RowSelection select_rows(hid_t dset, int64_t first, int64_t count) {
  RowSelection sel;
  sel.file = H5Obj(VK_CHECK(H5, H5Dget_space(dset)));
  const int nd = VK_CHECK(H5, H5Sget_simple_extent_ndims(sel.file));
  std::vector<hsize_t> dims(std::max(nd, 1), 1), start(std::max(nd, 1), 0);
  VK_CHECK(H5, H5Sget_simple_extent_dims(sel.file, dims.data(), nullptr));
  hsize_t row = 1;
  for (int i = 1; i < nd; ++i) row *= dims[i];
  if (first < 0 || count < 0 || static_cast<hsize_t>(first + count) > dims[0])
    throw RuntimeError("HDF5 row selection [" + std::to_string(first) + ", " +
                       std::to_string(first + count) + ") is outside a dataset of " +
                       std::to_string(dims[0]) + " rows");
  hsize_t n = static_cast<hsize_t>(count) * row;
  sel.mem = H5Obj(VK_CHECK(H5, H5Screate_simple(1, &n, nullptr)));
  if (count == 0) {
    VK_CHECK(H5, H5Sselect_none(sel.file));
    VK_CHECK(H5, H5Sselect_none(sel.mem));
  } else {
    std::vector<hsize_t> cnt(dims);
    start[0] = static_cast<hsize_t>(first);
    cnt[0] = static_cast<hsize_t>(count);
    VK_CHECK(H5, H5Sselect_hyperslab(sel.file, H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr));
  }
  return sel;
}
}  // namespace

template <class T>
void h5_write_slab(hid_t dset, int64_t first, int64_t count, const T* data, bool collective) {
  if (count == 0 && !collective) return;
  RowSelection sel = select_rows(dset, first, count);
  // An empty dataset has no storage to write to (the same on every rank).
  if (VK_CHECK(H5, H5Sget_simple_extent_npoints(sel.file)) == 0) return;
  H5Obj dxpl(VK_CHECK(H5, H5Pcreate(H5P_DATASET_XFER)));
  if (collective) VK_CHECK(H5, H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
  static const T dummy{};  // HDF5 wants a buffer even for an empty selection
  VK_CHECK(H5, H5Dwrite(dset, h5_type<T>(), sel.mem, sel.file, dxpl, data ? data : &dummy));
}

template <class T> void h5_read_slab(hid_t dset, int64_t first, int64_t count, T* out) {
  if (count == 0) return;
  RowSelection sel = select_rows(dset, first, count);
  VK_CHECK(H5, H5Dread(dset, h5_type<T>(), sel.mem, sel.file, H5P_DEFAULT, out));
}

#define VITKD_H5_INSTANTIATE(T)                                                            \
  template void h5_write_slab<T>(hid_t, int64_t, int64_t, const T*, bool);                 \
  template void h5_read_slab<T>(hid_t, int64_t, int64_t, T*);                              \
  template void h5_write<T>(hid_t, const std::string&, const T*, const std::vector<int64_t>&); \
  template void h5_read<T>(hid_t, const std::string&, std::vector<T>&);                    \
  template void h5_read<T>(hid_t, const std::string&, T*, int64_t);                         \
  template void h5_read_slice<T>(hid_t, const std::string&, int64_t, int64_t, T*);
VITKD_H5_INSTANTIATE(uint8_t)
VITKD_H5_INSTANTIATE(uint16_t)
VITKD_H5_INSTANTIATE(int16_t)
VITKD_H5_INSTANTIATE(int32_t)
VITKD_H5_INSTANTIATE(int64_t)
VITKD_H5_INSTANTIATE(float)
VITKD_H5_INSTANTIATE(double)
#undef VITKD_H5_INSTANTIATE

namespace {
void replace_attr(hid_t loc, const std::string& name) {
  if (H5Aexists(loc, name.c_str()) > 0) VK_CHECK(H5, H5Adelete(loc, name.c_str()));
}
template <class T>
void write_simple_attr(hid_t loc, const std::string& name, hid_t type, const T* v, hsize_t n) {
  replace_attr(loc, name);
  H5Obj space(VK_CHECK(H5, H5Screate_simple(1, &n, nullptr)));
  H5Obj a(VK_CHECK(H5, H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  VK_CHECK(H5, H5Awrite(a, type, v));
}
H5Obj open_attr(hid_t loc, const std::string& name) {
  if (H5Aexists(loc, name.c_str()) <= 0)
    throw UserError(file_of(loc) + ": missing HDF5 attribute '" + name + "'");
  return H5Obj(read_check(H5Aopen(loc, name.c_str(), H5P_DEFAULT), loc, "attribute '" + name + "'"));
}
/// Element count of an attribute's dataspace (0 for a null dataspace).
int64_t attr_points(hid_t a, const std::string& name) {
  H5Obj s(read_check(H5Aget_space(a), a, "attribute '" + name + "'"));
  return read_check(H5Sget_simple_extent_npoints(s), a, "attribute '" + name + "'");
}
/// Throws unless the attribute's element type is of one of the given classes.
void need_class(hid_t a, const std::string& name, std::initializer_list<H5T_class_t> ok,
                const char* expected) {
  H5Obj t(read_check(H5Aget_type(a), a, "attribute '" + name + "'"));
  const H5T_class_t c = H5Tget_class(t);
  for (H5T_class_t k : ok)
    if (c == k) return;
  throw UserError(file_of(a) + ": HDF5 attribute '" + name + "' must be " + expected +
                  "; recreate the file");
}
}  // namespace

void h5_attr_write(hid_t loc, const std::string& name, const std::string& value) {
  replace_attr(loc, name);
  H5Obj type(VK_CHECK(H5, H5Tcopy(H5T_C_S1)));
  VK_CHECK(H5, H5Tset_size(type, value.empty() ? 1 : value.size()));
  VK_CHECK(H5, H5Tset_strpad(type, H5T_STR_NULLPAD));
  H5Obj space(VK_CHECK(H5, H5Screate(H5S_SCALAR)));
  H5Obj a(VK_CHECK(H5, H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  std::string v = value.empty() ? std::string(1, '\0') : value;
  VK_CHECK(H5, H5Awrite(a, type, v.data()));
}
void h5_attr_write(hid_t loc, const std::string& name, int64_t value) {
  replace_attr(loc, name);
  H5Obj space(VK_CHECK(H5, H5Screate(H5S_SCALAR)));
  H5Obj a(VK_CHECK(H5, H5Acreate2(loc, name.c_str(), H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT)));
  VK_CHECK(H5, H5Awrite(a, H5T_NATIVE_INT64, &value));
}
void h5_attr_write(hid_t loc, const std::string& name, double value) {
  replace_attr(loc, name);
  H5Obj space(VK_CHECK(H5, H5Screate(H5S_SCALAR)));
  H5Obj a(VK_CHECK(H5, H5Acreate2(loc, name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT)));
  VK_CHECK(H5, H5Awrite(a, H5T_NATIVE_DOUBLE, &value));
}
void h5_attr_write(hid_t loc, const std::string& name, const std::vector<double>& value) {
  write_simple_attr(loc, name, H5T_NATIVE_DOUBLE, value.data(), value.size());
}
void h5_attr_write(hid_t loc, const std::string& name, const std::vector<std::string>& value) {
  replace_attr(loc, name);
  H5Obj type(VK_CHECK(H5, H5Tcopy(H5T_C_S1)));
  VK_CHECK(H5, H5Tset_size(type, H5T_VARIABLE));
  hsize_t n = value.size();
  H5Obj space(VK_CHECK(H5, H5Screate_simple(1, &n, nullptr)));
  H5Obj a(VK_CHECK(H5, H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  std::vector<const char*> ptrs;
  for (auto& s : value) ptrs.push_back(s.c_str());
  VK_CHECK(H5, H5Awrite(a, type, ptrs.data()));
}

bool h5_attr_exists(hid_t loc, const std::string& name) {
  return H5Aexists(loc, name.c_str()) > 0;
}

// Reading attributes of a user's file: a wrong type, shape or unreadable
// value is a UserError naming the file and attribute (see read_check).
std::string h5_attr_string(hid_t loc, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  H5Obj a = open_attr(loc, name);
  H5Obj ftype(read_check(H5Aget_type(a), a, what));
  if (H5Tget_class(ftype) != H5T_STRING || attr_points(a, name) != 1)
    throw UserError(file_of(loc) + ": HDF5 attribute '" + name +
                    "' must be a single string; recreate the file");
  if (H5Tis_variable_str(ftype) > 0) {
    H5Obj mtype(VK_CHECK(H5, H5Tcopy(H5T_C_S1)));
    VK_CHECK(H5, H5Tset_size(mtype, H5T_VARIABLE));
    char* p = nullptr;
    read_check(H5Aread(a, mtype, &p), a, what);
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ftype);
  std::string s(n, '\0');
  read_check(H5Aread(a, ftype, s.data()), a, what);
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t h5_attr_int(hid_t loc, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  H5Obj a = open_attr(loc, name);
  need_class(a, name, {H5T_INTEGER}, "an integer");
  if (attr_points(a, name) != 1)
    throw UserError(file_of(loc) + ": HDF5 attribute '" + name + "' must be a scalar");
  int64_t v = 0;
  read_check(H5Aread(a, H5T_NATIVE_INT64, &v), a, what);
  return v;
}

double h5_attr_double(hid_t loc, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  H5Obj a = open_attr(loc, name);
  need_class(a, name, {H5T_FLOAT, H5T_INTEGER}, "a number");
  if (attr_points(a, name) != 1)
    throw UserError(file_of(loc) + ": HDF5 attribute '" + name + "' must be a scalar");
  double v = 0;
  read_check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), a, what);
  return v;
}

std::vector<double> h5_attr_doubles(hid_t loc, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  H5Obj a = open_attr(loc, name);
  need_class(a, name, {H5T_FLOAT, H5T_INTEGER}, "an array of numbers");
  std::vector<double> v(attr_points(a, name));
  if (!v.empty()) read_check(H5Aread(a, H5T_NATIVE_DOUBLE, v.data()), a, what);
  return v;
}

std::vector<std::string> h5_attr_strings(hid_t loc, const std::string& name) {
  const std::string what = "attribute '" + name + "'";
  H5Obj a = open_attr(loc, name);
  H5Obj ftype(read_check(H5Aget_type(a), a, what));
  if (H5Tget_class(ftype) != H5T_STRING || H5Tis_variable_str(ftype) <= 0)
    throw UserError(file_of(loc) + ": HDF5 attribute '" + name +
                    "' must be an array of variable-length strings; recreate the file");
  size_t n = static_cast<size_t>(attr_points(a, name));
  std::vector<char*> ptrs(n, nullptr);
  H5Obj mtype(VK_CHECK(H5, H5Tcopy(H5T_C_S1)));
  VK_CHECK(H5, H5Tset_size(mtype, H5T_VARIABLE));
  if (n) read_check(H5Aread(a, mtype, ptrs.data()), a, what);
  std::vector<std::string> out;
  for (auto* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

void atomic_replace(const std::string& path, const std::string& tmp_path) {
  // Durable as well as atomic: the data reaches the disk before the rename,
  // and the rename before this returns (a crash leaves the old or the new file).
  VK_CHECK(FILE, sync_file(tmp_path));
  VK_CHECK(FILE, std::rename(tmp_path.c_str(), path.c_str()) == 0);
  VK_CHECK(FILE, sync_dir(parent_dir(path)));
}

}  // namespace vitkd
