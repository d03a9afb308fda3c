//===- ParameterValues.h - A stage's parameters whole: initial values, checkpoints ===//
/// \file
/// The table's tensors as values: the canonical initial ones
/// (runtime/trainer/Initialization.cpp), and each parameter's full tensors
/// gathered for a checkpoint or set from one.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/ParameterTable.h"

namespace mist::rt {

class ParameterValues : ParameterView {
public:
  /// Also completes the table's layout: which sums live in their gradient
  /// buffer, and which buffers exist only around their region's backward.
  explicit ParameterValues(ParameterTable &table);

  /// Canonical initial values, all weights resident, the optimizer state's
  /// offloaded tails already in host memory; then `load` may overwrite, and
  /// `settle` puts the weights where the plan keeps them between uses.
  /// `hostThreads`: threads drawing the values (initialValueThreads). `draw`
  /// false (a resumed run, whose checkpoint then loads every tensor) sets
  /// zeros instead of drawing values that would be overwritten: minutes for
  /// billions of weights.
  void initialize(uint64_t seed, int hostThreads, bool draw = true);
  void settle();

  /// The full tensor (gathered over the stage's dp and tp ranks), on every
  /// rank of the stage. Collective over the stage.
  std::vector<float> full(size_t p, int layer, ParamTensor what);
  /// Sets this rank's part of a tensor from the full values (of its size).
  void load(size_t p, int layer, ParamTensor what, const std::vector<float> &fullValues);

private:
  void swapOutOptimizer(State &s);
  void swapInOptimizer(State &s);
};

} // namespace mist::rt
