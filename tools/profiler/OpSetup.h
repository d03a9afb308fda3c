//===- OpSetup.h - From a shapes-file entry to the call to time ------------===//
/// \file
/// What the op timers (OpTimer on a GPU, CpuOpTimer on a CPU) share: which
/// setup an IR op name takes, and reading an entry's operand dimensions
/// with checks that turn a malformed or unsupported entry into "not timed,
/// because ..." instead of a crash. Each timer implements the setups: they
/// allocate the op's buffers and return the call to time.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/ShapesFile.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mist::profiler {

/// Thrown while setting up an op that cannot be timed; `why` says so.
struct NotTimed {
  std::string why;
};

/// Throws NotTimed{what} unless `ok`.
void need(bool ok, const std::string &what);

/// The product of `dims` (1 for a scalar).
int64_t elements(const std::vector<int64_t> &dims);

/// Base of an op timer's setup: the entry, checked views of its operands,
/// and the dispatch on the op's name.
class OpSetup {
public:
  explicit OpSetup(const ShapeEntry &e) : e(e), ops(e.operands) {}
  virtual ~OpSetup() = default;

  /// The call to time for the entry's op; throws NotTimed for ops without
  /// one (identities, collectives, dropout, position_embedding).
  std::function<void()> build();

protected:
  using Call = std::function<void()>;
  virtual Call gemm(bool lmHead) = 0;
  virtual Call gemmGrad(bool lmHead) = 0;
  virtual Call attention(bool grad) = 0;
  virtual Call layerNorm(bool grad) = 0;
  virtual Call rmsNorm(bool grad) = 0;
  virtual Call rope(bool grad) = 0;
  /// gelu, silu, mul, add, grad_add and the _grad ops of the first three.
  virtual Call elementwise(const std::string &op) = 0;
  virtual Call embedding(bool grad) = 0;
  virtual Call positionEmbeddingGrad() = 0;
  virtual Call crossEntropy(bool grad) = 0;

  /// Needs between `lo` and `hi` operands.
  void operands(size_t lo, size_t hi) const;
  /// The last dimension of operand `i` (needs one, positive).
  int64_t last(size_t i) const;
  /// A size attribute (heads, head_dim, rows, ...): a whole number in
  /// [1, 2^24], else NotTimed (0 when absent and `required` is false).
  int64_t sizeAttr(const std::string &key, bool required = true) const;
  /// Operand `i`'s elements over its last dimension.
  int64_t rowsOf(size_t i) const { return elements(ops[i]) / last(i); }

  const ShapeEntry &e;
  const std::vector<std::vector<int64_t>> &ops;
};

} // namespace mist::profiler
