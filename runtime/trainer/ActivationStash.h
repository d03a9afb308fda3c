//===- ActivationStash.h - Activations of micro-batches in flight ---------===//
/// \file
/// Under 1F1B a stage holds the activations of up to S - i micro-batches
/// between their forward and backward. The frames hold the buffers of the
/// micro-batch being computed; after a forward the stash takes that
/// micro-batch's activation buffers (every buffer but the parameters and
/// their gradients) out of the frames, leaving fresh ones, and gives them
/// back before its backward. The plan's activation offload ratio moves the
/// tail of each stashed buffer to host memory meanwhile.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/Trainer.h"
#include <map>

namespace mist::rt {

class ActivationStash {
public:
  ActivationStash(const StageSpec &stage, OffloadEngine &offload);
  /// Moves micro-batch `mb`'s activations out of the frames.
  void save(int mb, Frame &global, std::vector<Frame> &layers);
  /// Puts them back (the frames' current activations are dropped).
  void restore(int mb, Frame &global, std::vector<Frame> &layers);
  /// Micro-batches held now.
  size_t inFlight() const { return saved.size(); }

private:
  struct Saved {
    std::vector<std::vector<float>> floats, hosts; ///< per stashed float buffer
    std::vector<std::vector<int32_t>> ids;
  };
  /// Visits every stashed buffer of every frame in a fixed order.
  template <typename Fn> void forEach(Frame &global, std::vector<Frame> &layers, Fn fn);

  const StageSpec &spec;
  OffloadEngine &offload;
  std::vector<int> buffers; ///< indices of the activation buffers
  std::map<int, Saved> saved;
};

} // namespace mist::rt
