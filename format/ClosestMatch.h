//===- ClosestMatch.h - "did you mean" for a mistyped name -----------------===//
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mist {

/// The closest of `candidates` to `word` when it is a plausible typo: an
/// edit distance of at most a third of the word's length (at least 1).
std::optional<std::string> closestMatch(std::string_view word,
                                        const std::vector<std::string_view> &candidates);

} // namespace mist
