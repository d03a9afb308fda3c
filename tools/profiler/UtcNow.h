//===- UtcNow.h - When a profile was measured ------------------------------===//
#pragma once

#include <string>

namespace mist::profiler {

/// The current time in UTC, ISO 8601 ("2026-11-25T17:45:56Z").
std::string utcNow();

} // namespace mist::profiler
