//===- ProfileInputs.cpp - What both profilers read and record the same way ===//
#include "tools/profiler/ProfileInputs.h"

#include "format/ClusterReader.h"

#include <cstdio>

namespace mist::profiler {

bool readProfileInputs(const ProfilerOptions &opts, std::optional<Cluster> &base,
                       std::vector<ShapeEntry> &shapes, std::string &error) {
  if (!opts.basePath.empty()) {
    Cluster b;
    if (!readClusterYamlFile(opts.basePath, b, error)) {
      error = "--base: " + error;
      return false;
    }
    base = b;
  }
  if (!opts.shapesPath.empty() && !readShapesFile(opts.shapesPath, shapes, error)) {
    error = "--shapes: " + error;
    return false;
  }
  return true;
}

void recordOpTimes(const std::vector<ShapeEntry> &shapes, const ProfilerOptions &opts,
                   const char *tool, const std::function<OpTime(const ShapeEntry &)> &time,
                   Measurements &m) {
  m.opsListed = static_cast<int>(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShapeEntry &e = shapes[i];
    OpTime t;
    if (opts.skipOps.count(e.op))
      t.why = "--skip-ops";
    else
      t = time(e);
    if (t.timed) {
      char rounded[32];
      std::snprintf(rounded, sizeof rounded, "%.4g", t.seconds);
      m.ops.push_back({e.op, e.shape, std::stod(rounded)});
      std::fprintf(stderr, "%s: [%zu/%zu] %s %s: %.4g us\n", tool, i + 1, shapes.size(),
                   e.op.c_str(), e.shape.c_str(), t.seconds * 1e6);
    } else {
      m.notTimed.push_back({e.op, e.shape, t.why});
      std::fprintf(stderr, "%s: [%zu/%zu] %s %s: not timed (%s)\n", tool, i + 1, shapes.size(),
                   e.op.c_str(), e.shape.c_str(), t.why.c_str());
    }
  }
}

} // namespace mist::profiler
