//===- ShapesFile.h - The ops and shapes a profiler run measures ----------===//
/// \file
/// Reads the file `mistc --emit=profile-shapes` writes (backend/reports/ProfileShapes.h):
/// a `# mist-profile-shapes 1` first line, `#` comment lines, then one
/// `op TAB shape TAB attributes` line per measured-table entry the
/// performance model looks up (attributes `k=v,k=v` or `-`; the column may
/// be missing).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mist::profiler {

struct ShapeEntry {
  std::string op;                             ///< IR op name
  std::string shape;                          ///< the key, as written
  std::vector<std::vector<int64_t>> operands; ///< dims of each operand (empty: a scalar)
  std::map<std::string, std::string> attrs;
  int line = 0;

  /// An attribute as a number, or `dflt` when absent or not a number.
  double number(const std::string &key, double dflt) const;
  /// An attribute as text, or `dflt` when absent.
  std::string word(const std::string &key, const std::string &dflt) const;
};

/// Parses the text of a shapes file; on failure returns false with `error`
/// = "line N: what". Two lines for the same (op, shape) are an error.
/// `dtype`, when given, gets the model's training dtype from a `# dtype X`
/// comment (files of older mistc versions have none: left as it was).
bool parseShapes(const std::string &text, std::vector<ShapeEntry> &out, std::string &error,
                 std::string *dtype = nullptr);

/// The same for a file; the error names the file.
bool readShapesFile(const std::string &path, std::vector<ShapeEntry> &out, std::string &error,
                    std::string *dtype = nullptr);

} // namespace mist::profiler
