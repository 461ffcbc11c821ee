#pragma once
// Small string helpers shared by the configuration and the command line.
#include <string>
#include <vector>

namespace vitkd {

/// Closest candidate by edit distance (for "did you mean ...?"); "" when none
/// is plausibly related. A candidate "section.key" also matches on "key" alone.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
/// `v` through the printf format `f` (one number), e.g. fmt("%g", 1e-12) == "1e-12".
std::string fmt(const char* f, double v);
/// " (did you mean 'X'?)" with X = nearest(word, candidates), "" when none is near.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vitkd
