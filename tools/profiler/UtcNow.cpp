//===- UtcNow.cpp - When a profile was measured ----------------------------===//
#include "tools/profiler/UtcNow.h"

#include <ctime>

namespace mist::profiler {

std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace mist::profiler
