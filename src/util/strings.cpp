#include "util/strings.hpp"

#include <cstdio>

#include <algorithm>
#include <cstdint>

namespace vitkd {

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  auto dist = [](const std::string& a, const std::string& b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    // Compare against the full name and against the key part alone, so that
    // "optim.learning_rate" and "lr" both find "optim.lr".
    size_t d = dist(word, c);
    auto dot = c.find('.');
    if (dot != std::string::npos && word.find('.') == std::string::npos)
      d = std::min(d, dist(word, c.substr(dot + 1)));
    if (d < best_d) { best_d = d; best = c; }
  }
  // Only suggest something plausibly related.
  if (best_d > std::max<size_t>(3, word.size() / 2)) return "";
  return best;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string n = nearest(word, candidates);
  return n.empty() ? std::string() : " (did you mean '" + n + "'?)";
}

}  // namespace vitkd
