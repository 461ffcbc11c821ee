#include "h5_spec.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace vitkd::fuzz {

namespace {

// Closes an HDF5 identifier of any kind when it goes out of scope.
struct Id {
  hid_t id;
  explicit Id(hid_t i) : id(i) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (id < 0) return;
    switch (H5Iget_type(id)) {
      case H5I_FILE: H5Fclose(id); break;
      case H5I_GROUP: H5Gclose(id); break;
      case H5I_DATASET: H5Dclose(id); break;
      case H5I_DATASPACE: H5Sclose(id); break;
      case H5I_DATATYPE: H5Tclose(id); break;
      case H5I_ATTR: H5Aclose(id); break;
      case H5I_GENPROP_LST: H5Pclose(id); break;
      default: break;
    }
  }
  bool ok() const { return id >= 0; }
  operator hid_t() const { return id; }
};

constexpr hsize_t kMaxWrite = 1 << 17;  // elements written; larger extents stay unwritten
constexpr hsize_t kMaxAttr = 1024;      // attributes must stay small (compact storage)

size_t fixed_size(const Value& v) {
  size_t n = 1;
  for (const auto& s : v.strs) n = std::max(n, s.size());
  return std::min<size_t>(n, 256);
}

// File type of a value (also used as the memory type, except for Int32BE).
hid_t file_type(const Value& v) {
  switch (v.type) {
    case Type::FixedStr: {
      hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, fixed_size(v));
      H5Tset_strpad(t, H5T_STR_NULLPAD);
      return t;
    }
    case Type::VarStr: {
      hid_t t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, H5T_VARIABLE);
      return t;
    }
    case Type::Int64: return H5Tcopy(H5T_NATIVE_INT64);
    case Type::Int32: return H5Tcopy(H5T_NATIVE_INT32);
    case Type::Int32BE: return H5Tcopy(H5T_STD_I32BE);
    case Type::UInt8: return H5Tcopy(H5T_NATIVE_UINT8);
    case Type::UInt64: return H5Tcopy(H5T_NATIVE_UINT64);
    case Type::Float64: return H5Tcopy(H5T_NATIVE_DOUBLE);
    case Type::Float32: return H5Tcopy(H5T_NATIVE_FLOAT);
    case Type::Enum: {
      hid_t t = H5Tenum_create(H5T_NATIVE_INT32);
      int32_t a = 0, b = 1;
      H5Tenum_insert(t, "A", &a);
      H5Tenum_insert(t, "B", &b);
      return t;
    }
    case Type::Compound: {
      hid_t t = H5Tcreate(H5T_COMPOUND, 16);
      H5Tinsert(t, "a", 0, H5T_NATIVE_INT32);
      H5Tinsert(t, "b", 8, H5T_NATIVE_DOUBLE);
      return t;
    }
    case Type::Opaque: return H5Tcreate(H5T_OPAQUE, 4);
    case Type::Array: {
      hsize_t two = 2;
      return H5Tarray_create2(H5T_NATIVE_INT64, 1, &two);
    }
    default: return -1;
  }
}

hid_t make_space(const Value& v, hsize_t* npoints, bool unlimited) {
  *npoints = 0;
  if (v.space == Space::Null) return H5Screate(H5S_NULL);
  if (v.space == Space::Scalar) {
    *npoints = 1;
    return H5Screate(H5S_SCALAR);
  }
  hsize_t n = 1;
  bool overflow = false;
  for (hsize_t d : v.dims) {
    if (d != 0 && n > ~hsize_t(0) / d) overflow = true;
    n *= d;
  }
  *npoints = overflow ? ~hsize_t(0) : n;
  std::vector<hsize_t> maxd(v.dims.size(), H5S_UNLIMITED);
  return H5Screate_simple(static_cast<int>(v.dims.size()), v.dims.data(),
                          unlimited ? maxd.data() : nullptr);
}

template <class T> T at(const std::vector<T>& v, size_t i) { return v.empty() ? T() : v[i % v.size()]; }

// Fills `buf` with n elements of the value (cycling its numbers) and calls
// `write(mem_type, buf)`.
template <class W> void with_buffer(const Value& v, hsize_t n, W&& write) {
  switch (v.type) {
    case Type::FixedStr: {
      Id t(file_type(v));
      const size_t sz = fixed_size(v);
      std::vector<char> b(n * sz, '\0');
      for (hsize_t i = 0; i < n; ++i) {
        const std::string s = at(v.strs, i);
        std::memcpy(&b[i * sz], s.data(), std::min(sz, s.size()));
      }
      write(t.id, b.data());
      return;
    }
    case Type::VarStr: {
      Id t(file_type(v));
      std::vector<const char*> b(n);
      for (hsize_t i = 0; i < n; ++i) b[i] = v.strs.empty() ? "" : v.strs[i % v.strs.size()].c_str();
      write(t.id, b.data());
      return;
    }
    case Type::Float64:
    case Type::Float32: {
      std::vector<double> b(n);
      for (hsize_t i = 0; i < n; ++i) b[i] = at(v.reals, i);
      write(H5T_NATIVE_DOUBLE, b.data());
      return;
    }
    case Type::Compound: {
      Id t(file_type(v));
      std::vector<unsigned char> b(n * 16, 0);
      for (hsize_t i = 0; i < n; ++i) {
        int32_t a = static_cast<int32_t>(at(v.ints, i));
        double r = at(v.reals, i);
        std::memcpy(&b[i * 16], &a, 4);
        std::memcpy(&b[i * 16 + 8], &r, 8);
      }
      write(t.id, b.data());
      return;
    }
    case Type::Opaque: {
      Id t(file_type(v));
      std::vector<int32_t> b(n);
      for (hsize_t i = 0; i < n; ++i) b[i] = static_cast<int32_t>(at(v.ints, i));
      write(t.id, b.data());
      return;
    }
    case Type::Array: {
      Id t(file_type(v));
      std::vector<int64_t> b(2 * n);
      for (hsize_t i = 0; i < 2 * n; ++i) b[i] = at(v.ints, i);
      write(t.id, b.data());
      return;
    }
    case Type::Enum:
    case Type::Int32:
    case Type::Int32BE: {
      Id t(v.type == Type::Enum ? file_type(v) : H5Tcopy(H5T_NATIVE_INT32));
      std::vector<int32_t> b(n);
      for (hsize_t i = 0; i < n; ++i) b[i] = static_cast<int32_t>(at(v.ints, i));
      write(t.id, b.data());
      return;
    }
    default: {  // Int64, UInt8, UInt64: from int64 with HDF5's conversion (clips)
      std::vector<int64_t> b(n);
      for (hsize_t i = 0; i < n; ++i) b[i] = at(v.ints, i);
      write(H5T_NATIVE_INT64, b.data());
      return;
    }
  }
}

void write_attr(hid_t loc, const std::string& name, const Value& v) {
  hsize_t n = 0;
  Id space(make_space(v, &n, false));
  Id type(file_type(v));
  if (!space.ok() || !type.ok() || n > kMaxAttr) return;
  Id a(H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a.ok() || n == 0) return;
  with_buffer(v, n, [&](hid_t mt, const void* buf) { H5Awrite(a, mt, buf); });
}

void write_node(hid_t file, const std::string& path, const Node& node) {
  Id lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl, 1);
  switch (node.kind) {
    case Node::Group: {
      Id g(H5Gcreate2(file, path.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT));
      return;
    }
    case Node::SoftLink:
      H5Lcreate_soft(node.target.c_str(), file, path.c_str(), lcpl, H5P_DEFAULT);
      return;
    case Node::ExternalLink:
      H5Lcreate_external("/nonexistent/vitkd-fuzz.h5", node.target.c_str(), file, path.c_str(),
                         lcpl, H5P_DEFAULT);
      return;
    case Node::Dataset: {
      const Value& v = node.value;
      const bool chunked = node.chunked && v.space == Space::Simple;
      hsize_t n = 0;
      Id space(make_space(v, &n, chunked));
      Id type(file_type(v));
      if (!space.ok() || !type.ok()) return;
      Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
      if (chunked) {
        std::vector<hsize_t> chunk(v.dims.size());
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = std::clamp<hsize_t>(v.dims[i], 1, 16);
        if (H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) < 0) return;
      }
      Id d(H5Dcreate2(file, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT));
      if (!d.ok() || n == 0 || n > kMaxWrite || chunked) return;
      with_buffer(v, n, [&](hid_t mt, const void* buf) {
        H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
      });
      return;
    }
  }
}

const hsize_t kDims[] = {0, 1, 2, 3, 4, 5, 8, 16, 28, 100, 65537, hsize_t(1) << 31,
                         hsize_t(1) << 40, ~hsize_t(0) >> 2};

hsize_t decode_dim(Bytes& in) {
  // Mostly small extents (cheap to write), sometimes huge ones (never written).
  const uint8_t b = in.u8();
  return b < 200 ? b % 9 : kDims[b % (sizeof kDims / sizeof kDims[0])];
}

std::string decode_word(Bytes& in, const std::vector<std::string>& words) {
  const uint8_t b = in.u8();
  if (b < 160 && !words.empty()) return words[b % words.size()];
  return in.str(12);
}

int64_t decode_int(Bytes& in, const std::vector<int64_t>& ints) {
  const uint8_t b = in.u8();
  if (b < 64) return static_cast<int64_t>(b) - 8;  // small values, a few negative
  if (b < 200 && !ints.empty()) return ints[b % ints.size()];
  return in.i64();
}

double decode_real(Bytes& in, const std::vector<double>& reals) {
  const uint8_t b = in.u8();
  if (b < 200 && !reals.empty()) return reals[b % reals.size()];
  int64_t bits = in.i64();
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

std::vector<std::string> g_words;  // strings a decoded value may take (set by mutate)

}  // namespace

const char* type_name(Type t) {
  static const char* names[] = {"fixed-str", "var-str", "int64", "int32", "int32be", "uint8", "uint64",
                                "float64",   "float32", "enum",  "compound", "opaque", "array"};
  return t < Type::kCount ? names[static_cast<int>(t)] : "?";
}

Value str_value(const std::string& s) {
  Value v;
  v.type = Type::FixedStr;
  v.strs = {s};
  return v;
}
Value int_value(int64_t x) {
  Value v;
  v.ints = {x};
  return v;
}
Value real_value(double x) {
  Value v;
  v.type = Type::Float64;
  v.reals = {x};
  return v;
}
Value strs_value(const std::vector<std::string>& s) {
  Value v;
  v.type = Type::VarStr;
  v.space = Space::Simple;
  v.dims = {s.size()};
  v.strs = s;
  return v;
}
Value reals_value(const std::vector<double>& r) {
  Value v;
  v.type = Type::Float64;
  v.space = Space::Simple;
  v.dims = {r.size()};
  v.reals = r;
  return v;
}
Node dataset(Type t, std::vector<hsize_t> dims, std::vector<int64_t> ints) {
  Node n;
  n.kind = Node::Dataset;
  n.value.type = t;
  n.value.space = Space::Simple;
  n.value.dims = std::move(dims);
  n.value.ints = std::move(ints);
  return n;
}

Value decode_value(Bytes& in, const std::vector<int64_t>& ints, const std::vector<double>& reals) {
  Value v;
  v.type = static_cast<Type>(in.below(static_cast<uint32_t>(Type::kCount)));
  const uint8_t s = in.u8() % 8;
  if (s == 0) {
    v.space = Space::Null;
  } else if (s < 4) {
    v.space = Space::Scalar;
  } else {
    v.space = Space::Simple;
    const int rank = 1 + in.u8() % 5;
    for (int i = 0; i < rank; ++i) v.dims.push_back(decode_dim(in));
  }
  const int count = 1 + in.u8() % 6;
  v.ints.clear();
  v.reals.clear();
  v.strs.clear();
  for (int i = 0; i < count; ++i) {
    v.ints.push_back(decode_int(in, ints));
    v.reals.push_back(decode_real(in, reals));
    v.strs.push_back(decode_word(in, g_words));
  }
  return v;
}

void mutate(FileSpec& spec, Bytes& in, const std::vector<std::string>& attr_names,
            const std::vector<std::string>& paths, const std::vector<int64_t>& ints,
            const std::vector<double>& reals, int max_ops) {
  g_words = attr_names;
  g_words.insert(g_words.end(), {"", "vitkd-dataset", "vitkd-checkpoint", "teacher", "distill",
                                 "0.1.0", "[run]\nmode = \"teacher\"\n"});
  std::vector<std::string> all_paths = paths;
  all_paths.insert(all_paths.end(), {"/extra", "/model", "/train/images/x"});
  auto pick_attr = [&] { return in.u8() < 220 ? attr_names[in.below(attr_names.size())] : in.str(10); };
  auto pick_path = [&] { return all_paths[in.below(all_paths.size())]; };
  for (int op = 0; op < max_ops && !in.empty(); ++op) {
    switch (in.u8() % 9) {
      case 0: {  // set an attribute to a decoded value
        std::string name = pick_attr();
        spec.attrs[name] = decode_value(in, ints, reals);
        break;
      }
      case 1:  // remove an attribute
        spec.attrs.erase(pick_attr());
        break;
      case 2: {  // replace a node by a decoded dataset
        Node n;
        n.kind = Node::Dataset;
        n.value = decode_value(in, ints, reals);
        n.chunked = in.u8() & 1;
        spec.nodes[pick_path()] = n;
        break;
      }
      case 3:  // remove a node
        spec.nodes.erase(pick_path());
        break;
      case 4: {  // a group or a link (dangling, to another path, or external)
        Node n;
        n.kind = static_cast<Node::Kind>(in.u8() % 4);
        if (n.kind == Node::Dataset) n.kind = Node::SoftLink;
        n.target = in.u8() & 1 ? pick_path() : in.str(10);
        spec.nodes[pick_path()] = n;
        break;
      }
      case 5: {  // change one element of a dataset (e.g. a label)
        auto it = spec.nodes.find(pick_path());
        const size_t idx = in.u8();
        const int64_t x = decode_int(in, ints);
        if (it != spec.nodes.end() && !it->second.value.ints.empty()) {
          auto& v = it->second.value.ints;
          v[idx % v.size()] = x;
        }
        break;
      }
      case 6: {  // change one extent of a dataset
        auto it = spec.nodes.find(pick_path());
        const size_t axis = in.u8();
        const hsize_t d = decode_dim(in);
        if (it != spec.nodes.end() && !it->second.value.dims.empty())
          it->second.value.dims[axis % it->second.value.dims.size()] = d;
        break;
      }
      case 7: {  // change the element type of an attribute or dataset, keeping its values
        const auto t = static_cast<Type>(in.below(static_cast<uint32_t>(Type::kCount)));
        if (in.u8() & 1) {
          auto it = spec.attrs.find(pick_attr());
          if (it != spec.attrs.end()) it->second.type = t;
        } else {
          auto it = spec.nodes.find(pick_path());
          if (it != spec.nodes.end()) it->second.value.type = t;
        }
        break;
      }
      case 8: {  // change one number of an attribute
        auto it = spec.attrs.find(pick_attr());
        const int64_t x = decode_int(in, ints);
        const double r = decode_real(in, reals);
        if (it != spec.attrs.end()) {
          it->second.ints.assign(1, x);
          it->second.reals.assign(1, r);
        }
        break;
      }
    }
  }
}

bool write_h5(const FileSpec& spec, const std::string& path) {
  Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.ok()) return false;
  for (const auto& [name, v] : spec.attrs)
    if (!name.empty() && name.find('\0') == std::string::npos) write_attr(f, name, v);
  for (const auto& [p, node] : spec.nodes) write_node(f, p, node);
  return H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0;
}

std::string scratch_path(const char* tag) {
  std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "";
  if (dir.empty()) dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  return dir + "/vitkd-fuzz-" + tag + "-" + std::to_string(getpid()) + ".h5";
}

}  // namespace vitkd::fuzz
