//===- Frame.cpp - The storage of one region's buffers --------------------===//
#include "runtime/trainer/Trainer.h"

#include <algorithm>

namespace mist::rt {

Frame::Frame(const std::vector<BufferSpec> &buffers, bool layerFrame) {
  floats.resize(buffers.size());
  ints.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    // Buffers of the other frame kind, and those the stage never touches,
    // get no storage.
    if (buffers[i].layer != layerFrame || buffers[i].elements == 0)
      continue;
    size_t n = static_cast<size_t>(buffers[i].elements);
    if (buffers[i].kind == BufferKind::Ids)
      ints[i].assignZeros(n);
    else
      floats[i].assignZeros(n);
  }
}

} // namespace mist::rt
