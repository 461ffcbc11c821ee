#pragma once
// A flat JSON object writer for result.json (keys in insertion order).
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
  std::string str() const;
  /// Writes atomically (tmp + rename).
  void write(const std::string& path) const;

 private:
  JsonObject& raw(const std::string& key, std::string json);
  std::vector<std::pair<std::string, std::string>> items_;
};

std::string json_escape(const std::string& s);

}  // namespace vitkd
