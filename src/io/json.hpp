#pragma once
// JSON objects for result.json, model.json and the bench outputs: a thin
// builder over nlohmann::ordered_json (keys in insertion order; a second set
// of a key replaces it in place). Doubles keep 10 significant digits and a
// non-finite one is null; strings that are not UTF-8 have the bad bytes
// replaced (U+FFFD) rather than failing the write.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/choices.hpp"

namespace vitkd {

class JsonObject {
 public:
  JsonObject& set(const std::string& key, const std::string& v) { return put(key, v); }
  JsonObject& set(const std::string& key, const char* v) { return put(key, std::string(v)); }
  JsonObject& set(const std::string& key, double v);
  JsonObject& set(const std::string& key, int64_t v) { return put(key, v); }
  JsonObject& set(const std::string& key, int v) { return put(key, static_cast<int64_t>(v)); }
  JsonObject& set(const std::string& key, bool v) { return put(key, v); }
  /// A configuration choice, as its word.
  template <class E, std::enable_if_t<is_choice<E>::value, int> = 0> JsonObject& set(const std::string& key, E v) {
    return put(key, std::string(choice_name(v)));
  }
  JsonObject& set(const std::string& key, const std::vector<double>& v);
  JsonObject& set(const std::string& key, const std::vector<std::string>& v) { return put(key, v); }
  JsonObject& set(const std::string& key, const std::vector<int64_t>& v) { return put(key, v); }
  /// A list of objects.
  JsonObject& set(const std::string& key, const std::vector<JsonObject>& v);
  JsonObject& set_null(const std::string& key) { return put(key, nullptr); }
  /// The object indented by two (one key a line), as result.json is written.
  std::string str() const;
  /// The object on one line.
  std::string inline_str() const;
  /// Writes atomically (tmp + rename).
  void write(const std::string& path) const;
  const nlohmann::ordered_json& json() const { return j_; }

 private:
  JsonObject& put(const std::string& key, nlohmann::ordered_json v) {
    j_[key] = std::move(v);
    return *this;
  }
  nlohmann::ordered_json j_ = nlohmann::ordered_json::object();
};

/// `s` as a JSON string literal, quotes included.
std::string json_escape(const std::string& s);

}  // namespace vitkd
