#include "io/json.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

std::string json_escape(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
}

static std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

JsonObject& JsonObject::raw(const std::string& key, std::string json) {
  for (auto& kv : items_)
    if (kv.first == key) {
      kv.second = std::move(json);
      return *this;
    }
  items_.emplace_back(key, std::move(json));
  return *this;
}
JsonObject& JsonObject::set(const std::string& k, const std::string& v) { return raw(k, json_escape(v)); }
JsonObject& JsonObject::set(const std::string& k, double v) { return raw(k, num(v)); }
JsonObject& JsonObject::set(const std::string& k, int64_t v) { return raw(k, std::to_string(v)); }
JsonObject& JsonObject::set(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
JsonObject& JsonObject::set(const std::string& k, const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
  return raw(k, s + "]");
}

JsonObject& JsonObject::set(const std::string& k, const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_escape(v[i]);
  return raw(k, s + "]");
}

JsonObject& JsonObject::set(const std::string& k, const std::vector<JsonObject>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ",\n    " : "\n    ") + v[i].inline_str();
  return raw(k, s + (v.empty() ? "]" : "\n  ]"));
}

JsonObject& JsonObject::set_null(const std::string& k) { return raw(k, "null"); }

std::string JsonObject::inline_str() const {
  std::string s = "{";
  for (size_t i = 0; i < items_.size(); ++i)
    s += (i ? ", " : "") + json_escape(items_[i].first) + ": " + items_[i].second;
  return s + "}";
}

std::string JsonObject::str() const {
  std::string s = "{\n";
  for (size_t i = 0; i < items_.size(); ++i)
    s += "  " + json_escape(items_[i].first) + ": " + items_[i].second +
         (i + 1 < items_.size() ? ",\n" : "\n");
  return s + "}\n";
}

void JsonObject::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    VK_CHECK(FILE, static_cast<bool>(out));
    out << str();
    out.flush();
    VK_CHECK(FILE, static_cast<bool>(out));
  }
  atomic_replace(path, tmp);
}

}  // namespace vitkd
