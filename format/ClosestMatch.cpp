//===- ClosestMatch.cpp - "did you mean" for a mistyped name ---------------===//
#include "format/ClosestMatch.h"

#include <algorithm>

namespace mist {

namespace {

/// Levenshtein distance (insertions, deletions, replacements).
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

} // namespace

std::optional<std::string> closestMatch(std::string_view word,
                                        const std::vector<std::string_view> &candidates) {
  std::optional<std::string> best;
  size_t bestDistance = 0;
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  for (std::string_view c : candidates) {
    // Names of very different lengths are no typo of each other.
    if (c.size() > word.size() + limit || word.size() > c.size() + limit)
      continue;
    size_t d = editDistance(word, c);
    if (d <= limit && (!best || d < bestDistance)) {
      best = std::string(c);
      bestDistance = d;
    }
  }
  return best;
}

} // namespace mist
