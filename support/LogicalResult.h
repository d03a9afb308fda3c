//===- LogicalResult.h - Success/failure result ---------------------------===//
/// \file
/// A two-state result for functions whose failure has already been reported
/// as a diagnostic (LLVM 14 has no llvm::LogicalResult).
//===----------------------------------------------------------------------===//
#pragma once

namespace mist {

class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success() { return LogicalResult(true); }
  static LogicalResult failure() { return LogicalResult(false); }
  bool succeeded() const { return ok; }
  bool failed() const { return !ok; }

private:
  explicit LogicalResult(bool ok) : ok(ok) {}
  bool ok;
};

inline LogicalResult success() { return LogicalResult::success(); }
inline LogicalResult failure() { return LogicalResult::failure(); }
inline bool succeeded(LogicalResult r) { return r.succeeded(); }
inline bool failed(LogicalResult r) { return r.failed(); }

} // namespace mist
