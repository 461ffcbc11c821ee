#pragma once
// A JSON object writer for result.json (keys in insertion order; values are
// numbers, strings, booleans, null, lists of them, or lists of objects).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vitkd {

class JsonObject {
 public:
  JsonObject& set(const std::string& key, const std::string& v);
  JsonObject& set(const std::string& key, const char* v) { return set(key, std::string(v)); }
  JsonObject& set(const std::string& key, double v);
  JsonObject& set(const std::string& key, int64_t v);
  JsonObject& set(const std::string& key, int v) { return set(key, static_cast<int64_t>(v)); }
  JsonObject& set(const std::string& key, bool v);
  JsonObject& set(const std::string& key, const std::vector<double>& v);
  JsonObject& set(const std::string& key, const std::vector<std::string>& v);
  /// A list of objects, each written on one line.
  JsonObject& set(const std::string& key, const std::vector<JsonObject>& v);
  JsonObject& set_null(const std::string& key);
  /// The object on several lines (one key a line), as result.json is written.
  std::string str() const;
  /// The object on one line.
  std::string inline_str() const;
  /// Writes atomically (tmp + rename).
  void write(const std::string& path) const;

 private:
  JsonObject& raw(const std::string& key, std::string json);
  std::vector<std::pair<std::string, std::string>> items_;
};

std::string json_escape(const std::string& s);

}  // namespace vitkd
