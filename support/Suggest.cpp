//===- Suggest.cpp - "did you mean" for misspelled names ------------------===//
#include "support/Suggest.h"

#include <algorithm>

using namespace mist;

namespace {

/// Edits (insert, delete, replace, swap two neighbours) from a to b: a swap
/// is one typo, as in `gtp` for `gpt`.
unsigned typoDistance(llvm::StringRef a, llvm::StringRef b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<unsigned>> d(n + 1, std::vector<unsigned>(m + 1));
  for (size_t i = 0; i <= n; ++i)
    d[i][0] = unsigned(i);
  for (size_t j = 0; j <= m; ++j)
    d[0][j] = unsigned(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      unsigned cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

} // namespace

std::optional<std::string> mist::closestName(llvm::StringRef name,
                                             const std::vector<std::string> &candidates) {
  // Names of one or two letters are too short to guess from.
  if (name.size() < 3)
    return std::nullopt;
  const unsigned limit = std::max<unsigned>(1, unsigned(name.size()) / 3);
  std::optional<std::string> best;
  unsigned bestDistance = limit + 1;
  for (const std::string &c : candidates) {
    if (c == name || c.size() + limit < name.size() || name.size() + limit < c.size())
      continue;
    unsigned d = typoDistance(name, c);
    if (d < bestDistance) { // ties: the first candidate, so the order decides
      bestDistance = d;
      best = c;
    }
  }
  return best;
}

std::string mist::didYouMean(llvm::StringRef name, const std::vector<std::string> &candidates) {
  auto best = closestName(name, candidates);
  return best ? "; did you mean '" + *best + "'?" : "";
}
