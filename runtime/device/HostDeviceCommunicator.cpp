//===- HostDeviceCommunicator.cpp - CPU ranks: device buffers over MPI ----===//
#include "runtime/device/DeviceCommunicator.h"

namespace mist::rt::device {

std::unique_ptr<Communicator> makeWorldCommunicator(MpiCommunicator &world) {
  // Device memory is host memory here: MPI moves it, on a duplicate of the
  // world so the trainer's messages never meet the host traffic's.
  return world.split(0, world.rank());
}

} // namespace mist::rt::device
