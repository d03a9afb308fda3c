//===- NcclProbe.cpp - Collective and point-to-point bandwidth over NCCL --===//
#include "tools/profiler/NcclProbe.h"

#include "runtime/comm/NcclCommunicator.h"
#include "tools/profiler/DeviceBuffer.h"

namespace mist::profiler {

LinkFigures measureNccl(rt::MpiCommunicator &world, const NodeLayout &l, int warmup, int repeats) {
  auto nccl = rt::NcclCommunicator::create(world);
  const size_t gathered = size_t(1) << 30;
  DeviceBuffer<float> out(gathered / sizeof(float)), in(gathered / sizeof(float));
  ProbeBuffers b{in.get(), out.get(), gathered, size_t(256) << 20};
  return measureLinks(world, *nccl, l, b, warmup, repeats,
                      "NCCL all-gather of 1 GiB gathered (busbw) and of 4 bytes per rank "
                      "(latency), slowest rank, wall clock around the blocking call");
}

} // namespace mist::profiler
