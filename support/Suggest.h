//===- Suggest.h - "did you mean" for misspelled names --------------------===//
/// \file
/// The closest of a set of known names to a misspelled one, for diagnostics
/// that say "did you mean 'hidden'?". Close means at most a third of the
/// name's length in typos (at least 1; a swap of neighbours is one): `hiden`
/// finds `hidden`, `gtp` finds `gpt`, names under 3 letters find nothing.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>

namespace mist {

std::optional<std::string> closestName(llvm::StringRef name,
                                       const std::vector<std::string> &candidates);

/// "; did you mean 'x'?" or "" when nothing is close.
std::string didYouMean(llvm::StringRef name, const std::vector<std::string> &candidates);

} // namespace mist
