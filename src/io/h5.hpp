#pragma once
// Thin, checked helpers over the HDF5 C API. Every call goes through
// VK_CHECK(H5, ...); handles close themselves (H5Obj). HDF5 is built without
// thread safety, so every HDF5 call made while the prefetch thread may be
// running must hold h5_lock().
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vitkd {

/// The process-wide lock around HDF5 (the library is not thread-safe).
std::recursive_mutex& h5_mutex();
using H5Lock = std::lock_guard<std::recursive_mutex>;

/// Turns off HDF5's automatic error-stack printing; errors are reported
/// through VK_CHECK / UserError instead. Call once at start-up.
void h5_silence_errors();

/// Owning HDF5 identifier; closes with H5Oclose/H5Fclose/... as appropriate.
class H5Obj {
 public:
  H5Obj() = default;
  explicit H5Obj(hid_t id) : id_(id) {}
  H5Obj(const H5Obj&) = delete;
  H5Obj& operator=(const H5Obj&) = delete;
  H5Obj(H5Obj&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  H5Obj& operator=(H5Obj&& o) noexcept;
  ~H5Obj() { close(); }
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void close();  ///< closes now (checked); safe to call twice
  /// Gives up ownership without closing (e.g. a collective file while an
  /// error unwinds one rank alone: closing would wait for the others).
  void release() { id_ = -1; }
 private:
  hid_t id_ = -1;
};

/// Opens an existing file read-only (POSIX driver, independent per rank).
/// A missing, unreadable or non-HDF5 file is a UserError naming `what`.
H5Obj h5_open_read(const std::string& path, const std::string& what);
/// Creates (truncates) a file with the POSIX driver (one writer).
H5Obj h5_create(const std::string& path);
/// Creates (truncates) a file collectively with the MPI-IO driver.
H5Obj h5_create_parallel(const std::string& path);
/// Opens a file collectively with the MPI-IO driver (read-only or read-write).
H5Obj h5_open_parallel(const std::string& path, bool write);

bool h5_exists(hid_t loc, const std::string& path);
/// Creates intermediate groups as needed.
H5Obj h5_group(hid_t file, const std::string& path);

/// Shape and element type of a dataset.
struct H5DatasetInfo {
  std::vector<int64_t> dims;  ///< extent per axis
  H5T_class_t type_class;     ///< H5T_INTEGER, H5T_FLOAT, ...
  size_t type_size;           ///< bytes per element
  bool is_signed;             ///< for integers
  std::string describe() const;  ///< e.g. "uint8 [60000,28,28,1]"
};
H5DatasetInfo h5_dataset_info(hid_t file, const std::string& path);

/// Memory type for T (uint8, int16, int32, int64, float, double, uint16 for bf16/fp16 bits).
template <class T> hid_t h5_type();

/// Writes a whole contiguous dataset (creates it).
template <class T>
void h5_write(hid_t loc, const std::string& path, const T* data, const std::vector<int64_t>& dims);
template <class T>
void h5_write(hid_t loc, const std::string& path, const std::vector<T>& v) {
  h5_write(loc, path, v.data(), {static_cast<int64_t>(v.size())});
}
/// Reads a whole dataset into `out` (resized); checks the element count.
/// Like h5_dataset_info and the h5_attr_* readers, these read files the user
/// supplied: a failure is a UserError naming the file and object, not an abort.
template <class T> void h5_read(hid_t loc, const std::string& path, std::vector<T>& out);
template <class T> void h5_read(hid_t loc, const std::string& path, T* out, int64_t count);
/// Reads elements [start, start + count) of a one-dimensional dataset into
/// `out` (memory bounded by `count` however large the dataset claims to be).
template <class T>
void h5_read_slice(hid_t loc, const std::string& path, int64_t start, int64_t count, T* out);

/// Reads rows `rows` (sorted ascending) of a dataset whose first axis is the
/// sample axis, into `out` (rows.size() * row_elems elements, in the order of
/// `rows`). Consecutive rows are coalesced into one hyperslab each, and the
/// union is read with a single H5Dread.
template <class T>
void h5_read_rows(hid_t dset, const std::vector<int64_t>& rows, int64_t row_elems, T* out);
/// Writes `data` (rows.size() * row_elems elements, in the order of `rows`,
/// sorted ascending and distinct) to rows `rows` of a dataset whose first axis
/// is the sample axis: one H5Dwrite of coalesced hyperslabs, independent (in a
/// file opened with the MPI-IO driver each rank writes its own rows alone).
/// An empty `rows` writes nothing.
template <class T>
void h5_write_rows(hid_t dset, const std::vector<int64_t>& rows, int64_t row_elems, const T* data);

/// Reads the element ranges [first, second) of a one-dimensional uint8
/// dataset (sorted ascending, not overlapping; empty ranges allowed) into
/// `out` back to back: adjacent ranges coalesced, one H5Dread.
void h5_read_ranges(hid_t dset, const std::vector<std::pair<int64_t, int64_t>>& ranges, uint8_t* out);

/// Creates a dataset of `dims` (intermediate groups as needed). In a file
/// opened with the MPI-IO driver this is collective: every rank calls it with
/// the same arguments, in the same order.
H5Obj h5_create_dataset(hid_t loc, const std::string& path, hid_t type,
                        const std::vector<int64_t>& dims);
/// The same, chunked along axis 0 in chunks of `chunk_rows` rows (whole rows
/// of the other axes), for files read a block of rows at a time; chunk_rows 0
/// is contiguous, as h5_create_dataset.
H5Obj h5_create_dataset_chunked(hid_t loc, const std::string& path, hid_t type,
                                const std::vector<int64_t>& dims, int64_t chunk_rows);
/// Writes rows [first, first + count) along axis 0 of `dset` (a row is the
/// product of the other axes). `count` may be 0. With `collective`, every rank
/// of the file's communicator must call it (MPI-IO collective transfer).
template <class T>
void h5_write_slab(hid_t dset, int64_t first, int64_t count, const T* data, bool collective);
/// Reads rows [first, first + count) along axis 0 of `dset`.
template <class T> void h5_read_slab(hid_t dset, int64_t first, int64_t count, T* out);

// Attributes on a file, group or dataset (`loc`).
void h5_attr_write(hid_t loc, const std::string& name, const std::string& value);
void h5_attr_write(hid_t loc, const std::string& name, int64_t value);
void h5_attr_write(hid_t loc, const std::string& name, double value);
void h5_attr_write(hid_t loc, const std::string& name, const std::vector<double>& value);
void h5_attr_write(hid_t loc, const std::string& name, const std::vector<std::string>& value);
bool h5_attr_exists(hid_t loc, const std::string& name);

/// The header every vitkd HDF5 file carries: root attributes `format` (a name)
/// and `format_version`. Written by h5_write_format; h5_require_format checks
/// both and throws UserError "PATH: not a vitkd WHAT (...); FIX" or
/// "PATH: WHAT format version N is not supported (this vitkd reads M); FIX".
struct H5Format {
  const char* name;     ///< e.g. "vitkd-checkpoint"
  int64_t version;      ///< the only version this build reads and writes
  const char* what;     ///< e.g. "checkpoint", for messages
  const char* fix;      ///< what the user should do with a wrong file
};
void h5_write_format(hid_t file, const H5Format& fmt);
void h5_require_format(hid_t file, const std::string& path, const H5Format& fmt);
std::string h5_attr_string(hid_t loc, const std::string& name);
int64_t h5_attr_int(hid_t loc, const std::string& name);
double h5_attr_double(hid_t loc, const std::string& name);
std::vector<double> h5_attr_doubles(hid_t loc, const std::string& name);
std::vector<std::string> h5_attr_strings(hid_t loc, const std::string& name);

/// Renames the closed file `tmp_path` onto `path`: atomic (POSIX rename) and
/// durable (fsync of the file before, of the directory after).
void atomic_replace(const std::string& path, const std::string& tmp_path);

}  // namespace vitkd
