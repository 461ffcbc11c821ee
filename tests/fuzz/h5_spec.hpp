#pragma once
// A description of an HDF5 file's layout (root attributes; groups, datasets
// and links by path) that the fuzz targets mutate from fuzz input bytes and
// then write as a real HDF5 file. HDF5's own parser is not the target: the
// files are always well-formed HDF5, only their layout is arbitrary.
#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz_bytes.hpp"

namespace vitkd::fuzz {

/// Element types an attribute or dataset may have.
enum class Type : uint8_t {
  FixedStr,   ///< fixed-length C string (what vitkd writes for a string)
  VarStr,     ///< variable-length string
  Int64,      ///< native int64
  Int32,      ///< native int32 (what vitkd writes for labels)
  Int32BE,    ///< big-endian int32
  UInt8,
  UInt64,
  Float64,
  Float32,
  Enum,       ///< enum over int32
  Compound,   ///< {int32 a; double b}
  Opaque,     ///< 4-byte opaque
  Array,      ///< H5T_ARRAY of 2 int64
  kCount
};
const char* type_name(Type t);

/// Dataspace of an attribute or dataset.
enum class Space : uint8_t { Scalar, Simple, Null };

/// One attribute or dataset value: type, shape and values (cycled to fill).
struct Value {
  Type type = Type::Int64;
  Space space = Space::Scalar;
  std::vector<hsize_t> dims;        ///< for Simple
  std::vector<int64_t> ints{0};     ///< integer-like types
  std::vector<double> reals{0.0};   ///< float types
  std::vector<std::string> strs{""};///< string types
};

/// What lives at a path.
struct Node {
  enum Kind : uint8_t { Group, Dataset, SoftLink, ExternalLink } kind = Group;
  Value value;              ///< for Dataset
  std::string target;       ///< for links
  bool chunked = false;     ///< chunked storage (never written: fill value 0)
};

struct FileSpec {
  std::map<std::string, Value> attrs;  ///< root attributes by name
  std::map<std::string, Node> nodes;   ///< by absolute path, created in path order
};

// Convenience constructors for templates.
Value str_value(const std::string& s);
Value int_value(int64_t v);
Value real_value(double v);
Value strs_value(const std::vector<std::string>& v);  ///< 1-D var-length strings
Value reals_value(const std::vector<double>& v);      ///< 1-D float64
Node dataset(Type t, std::vector<hsize_t> dims, std::vector<int64_t> ints);

/// Decodes one value from the bytes (type, space, dims, values), using
/// `ints` / `reals` as a table of interesting numbers.
Value decode_value(Bytes& in, const std::vector<int64_t>& ints, const std::vector<double>& reals);

/// Applies up to `max_ops` mutations decoded from `in` to `spec`, choosing
/// attribute names from `attr_names` and paths from `paths` (plus a few made
/// up ones), numbers from the tables.
void mutate(FileSpec& spec, Bytes& in, const std::vector<std::string>& attr_names,
            const std::vector<std::string>& paths, const std::vector<int64_t>& ints,
            const std::vector<double>& reals, int max_ops = 12);

/// Writes `spec` as an HDF5 file at `path` (truncating). Objects HDF5 refuses
/// to create (say, a dataset below a dataset) are left out. Returns false if
/// the file itself could not be written.
bool write_h5(const FileSpec& spec, const std::string& path);

/// A scratch file path in /dev/shm (or $TMPDIR) unique to this process.
std::string scratch_path(const char* tag);

}  // namespace vitkd::fuzz
