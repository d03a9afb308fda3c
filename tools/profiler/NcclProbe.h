//===- NcclProbe.h - Collective and point-to-point bandwidth over NCCL ----===//
/// \file
/// CollectiveProbe over NCCL (runtime/comm/NcclCommunicator, library
/// mistrtCommNccl) with one MPI rank per GPU: 1 GiB gathered, 256 MiB sent
/// point to point, in device memory.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/CollectiveProbe.h"

namespace mist::profiler {

LinkFigures measureNccl(rt::MpiCommunicator &world, const NodeLayout &layout, int warmup,
                        int repeats);

} // namespace mist::profiler
