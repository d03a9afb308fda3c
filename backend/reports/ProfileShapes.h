//===- ProfileShapes.h - What a profiler must measure for a model ---------===//
/// \file
/// `--emit=profile-shapes`: every (op, shape key) the performance model looks
/// up in a cluster's measured-op table (ModelProfile::measuredLookups) at a
/// set of stage shapes (micro-batch, tp), deduplicated and sorted, each with
/// the attributes a profiler needs to run the op that its operand shapes do
/// not say (head counts, head dim, causal, ...). tools/profiler/ reads the
/// file and measures each line on the GPU (docs/cluster.md, "Profiling a
/// cluster"). Format, one line each:
///
///   # mist-profile-shapes 1
///   # <comment lines>
///   <op> TAB <shape key> TAB <attributes or ->
///
/// Attributes are `key=value` joined by ',' in key order, evaluated at the
/// stage shape as in --emit=lowered, except that `heads` and `kv_heads` of
/// attention and rope ops are this tp rank's counts.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "perfmodel/ModelProfile.h"
#include "support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mist {

/// The first line of a profile-shapes file.
constexpr const char *profileShapesHeader = "# mist-profile-shapes 1";

struct ProfileShape {
  std::string op;    ///< IR op name, e.g. "linear_grad"
  std::string shape; ///< the measured-table shape key, e.g. "8192x2048,2048x6144"
  std::string attrs; ///< "heads=16,head_dim=128,..." or "-"
};

/// The lookups of `model` at each (micro-batch, tp) of `stageShapes`, one per
/// (op, shape), sorted by op then shape (byte order); the attributes of the
/// first op met (stage shapes in the order given, regions and ops in
/// order) when two share a key. Reports an error and returns nullopt when a
/// stage shape cannot be lowered.
std::optional<std::vector<ProfileShape>>
collectProfileShapes(const Module &m, const ModelProfile &model,
                     const std::vector<std::pair<int, int>> &stageShapes, DiagnosticEngine &diag);

/// The file: the header, `comments` as `# ` lines, a column legend, the
/// entries.
void writeProfileShapes(const std::vector<ProfileShape> &shapes,
                        const std::vector<std::string> &comments, llvm::raw_ostream &os);

} // namespace mist
