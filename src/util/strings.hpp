#pragma once
// Small string helpers shared by the configuration and the command line.
#include <string>
#include <vector>

namespace vitkd {

/// Closest candidate by edit distance (for "did you mean ...?"); "" when none
/// is plausibly related. A candidate "section.key" also matches on "key" alone.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vitkd
