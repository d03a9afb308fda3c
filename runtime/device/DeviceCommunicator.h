//===- DeviceCommunicator.h - The group device buffers travel over --------===//
/// \file
/// The trainer's process groups (tp, dp, pipeline, the tied first and last
/// stages) move device buffers, so which communicator they are made from
/// depends on the device layer a trainer is linked with, like the ops:
/// - CPU ranks (HostDeviceCommunicator.cpp): MPI, a duplicate of the world;
/// - GPUs (CudaDeviceCommunicator.cpp): NCCL, bootstrapped over the MPI
///   world; collectives are stream-ordered on the calling thread's current
///   stream (device::currentStream) with no host wait, each ordered after the
///   communicator's previous call by an event; pipeline send/recv and the
///   scalar reductions stay host-synchronous (docs/runtime.md, "NCCL").
/// Host data (checkpoint tensors, scalars, the trace) keeps using the MPI
/// world itself.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/MpiCommunicator.h"
#include <memory>

namespace mist::rt::device {

/// Collective over `world`: every rank calls it at the same point.
std::unique_ptr<Communicator> makeWorldCommunicator(MpiCommunicator &world);

} // namespace mist::rt::device
