//===- ValueRange.cpp - The ranges a number in an input file must lie in --===//
#include "format/ValueRange.h"

#include "format/Limits.h"

#include <cstdlib>
#include <string>

namespace mist {

const char *rangeProblem(double v, Range range) {
  switch (range) {
  case Range::Any:
    return nullptr;
  case Range::NonNegative:
    return v >= 0 ? nullptr : "must not be negative";
  case Range::Positive:
    return v > 0 ? nullptr : "must be positive";
  case Range::Figure:
    return v >= 1e-6 && v <= 1e9 ? nullptr : "must be between 1e-06 and 1e+09";
  case Range::Fraction:
    return v > 0 && v <= 1 ? nullptr : "must be in (0, 1]";
  case Range::Ratio:
    return v >= 0 && v <= 1 ? nullptr : "must be in [0, 1]";
  case Range::AtLeastOne:
    return v >= 1 ? nullptr : "must be at least 1";
  case Range::Count:
    return v < 1                          ? "must be at least 1"
           : v > double(limits::maxCount) ? "must be at most 16,777,216 (mistc's limit)"
                                          : nullptr;
  case Range::LayerIndex:
    return v < 0 ? "must not be negative"
           : v >= double(limits::maxLayers)
               ? "must be at most 999,999 (mistc accepts 1,000,000 layers)"
               : nullptr;
  }
  return nullptr;
}

std::optional<double> scalarReal(std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string_view::npos)
    return std::nullopt;
  const std::string copy(text); // strtod wants a terminated string
  char *end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size())
    return std::nullopt;
  return v;
}

std::optional<bool> scalarBool(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE")
    return true;
  if (text == "false" || text == "False" || text == "FALSE")
    return false;
  return std::nullopt;
}

} // namespace mist
