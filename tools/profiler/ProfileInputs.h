//===- ProfileInputs.h - What both profilers read and record the same way --===//
/// \file
/// mist-profile (GPU) and mist-profile-cpu share these steps: reading the
/// --base cluster and the --shapes file, and timing every entry of the
/// shapes file into Measurements (the figure, or why it was not timed, and a
/// progress line per entry on stderr).
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/Measurements.h"
#include "tools/profiler/ProfilerOptions.h"
#include "tools/profiler/ShapesFile.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mist::profiler {

/// One op's time, or why it has none.
struct OpTime {
  bool timed = false;
  double seconds = 0;
  std::string why; ///< when not timed: the reason
};

/// Reads `--base` and `--shapes` when given; on failure returns false with
/// `error` naming the flag ("--base: ..."). `shapesDtype`, when given, gets
/// the model's dtype the shapes file records (empty when it records none).
bool readProfileInputs(const ProfilerOptions &opts, std::optional<Cluster> &base,
                       std::vector<ShapeEntry> &shapes, std::string &error,
                       std::string *shapesDtype = nullptr);

/// Times every entry of `shapes` with `time` (those of --skip-ops not) into
/// `m.ops` (4 significant digits) or `m.notTimed`; `tool` prefixes the
/// progress lines.
void recordOpTimes(const std::vector<ShapeEntry> &shapes, const ProfilerOptions &opts,
                   const char *tool, const std::function<OpTime(const ShapeEntry &)> &time,
                   Measurements &m);

} // namespace mist::profiler
