#include "io/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "io/h5.hpp"
#include "util/error.hpp"

namespace vitkd {

namespace {
constexpr auto kReplace = nlohmann::ordered_json::error_handler_t::replace;

// 10 significant digits (what result.json's figures carry); null when not finite.
nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return std::strtod(b, nullptr);
}

// One line with ", " and ": " between items, as result.json has always read.
std::string one_line(const nlohmann::ordered_json& j) {
  if (!j.is_structured()) return j.dump(-1, ' ', false, kReplace);
  std::string s = j.is_object() ? "{" : "[";
  const char* sep = "";
  for (auto it = j.begin(); it != j.end(); ++it, sep = ", ")
    s += sep + (j.is_object() ? json_escape(it.key()) + ": " : "") + one_line(*it);
  return s + (j.is_object() ? "}" : "]");
}
}  // namespace

std::string json_escape(const std::string& s) { return nlohmann::ordered_json(s).dump(-1, ' ', false, kReplace); }

JsonObject& JsonObject::set(const std::string& k, double v) { return put(k, number(v)); }

JsonObject& JsonObject::set(const std::string& k, const std::vector<double>& v) {
  auto a = nlohmann::ordered_json::array();
  for (double x : v) a.push_back(number(x));
  return put(k, std::move(a));
}

JsonObject& JsonObject::set(const std::string& k, const std::vector<JsonObject>& v) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& o : v) a.push_back(o.j_);
  return put(k, std::move(a));
}

// One key a line; a list of objects with one object a line.
std::string JsonObject::str() const {
  std::string s = "{\n";
  const char* sep = "";
  for (auto it = j_.begin(); it != j_.end(); ++it, sep = ",\n") {
    const auto& v = *it;
    std::string value = one_line(v);
    if (v.is_array() && !v.empty() && v.front().is_object()) {
      value = "[";
      for (size_t i = 0; i < v.size(); ++i) value += (i ? ",\n    " : "\n    ") + one_line(v[i]);
      value += "\n  ]";
    }
    s += sep + std::string("  ") + json_escape(it.key()) + ": " + value;
  }
  return s + (j_.empty() ? "}\n" : "\n}\n");
}

std::string JsonObject::inline_str() const { return one_line(j_); }

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
