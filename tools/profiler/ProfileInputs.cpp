//===- ProfileInputs.cpp - What both profilers read and record the same way ===//
#include "tools/profiler/ProfileInputs.h"

#include "format/ClusterReader.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

namespace mist::profiler {

namespace {

/// Whether `name` is an op of the IR (ir/Ops.def, read as data: the
/// profiler links nothing of the compiler).
bool isIrOpName(std::string_view name) {
  static const std::string_view names[] = {
#define MIST_FWD_OP(Kind, Name) Name, Name "_grad",
#define MIST_OP(Kind, Name) Name,
#include "ir/Ops.def"
  };
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

} // namespace

bool readProfileInputs(const ProfilerOptions &opts, std::optional<Cluster> &base,
                       std::vector<ShapeEntry> &shapes, std::string &error,
                       std::string *shapesDtype) {
  if (!opts.basePath.empty()) {
    Cluster b;
    ClusterReadOptions options;
    options.knownOp = isIrOpName;
    if (!readClusterFile(opts.basePath, options, b, error)) {
      error = "--base: " + error;
      return false;
    }
    base = b;
  }
  if (!opts.shapesPath.empty() && !readShapesFile(opts.shapesPath, shapes, error, shapesDtype)) {
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
