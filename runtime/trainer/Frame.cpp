//===- Frame.cpp - A view of one region's buffers -------------------------===//
#include "runtime/trainer/Trainer.h"

#include "runtime/comm/MpiCommunicator.h"

namespace mist::rt {

DeviceTensor &Frame::vec(int i) {
  if (!floats[size_t(i)])
    abortJob("frame: float buffer " + std::to_string(i) + " is not bound here");
  return *floats[size_t(i)];
}

DeviceArray<int32_t> &Frame::idVec(int i) {
  if (!ints[size_t(i)])
    abortJob("frame: id buffer " + std::to_string(i) + " is not bound here");
  return *ints[size_t(i)];
}

void Frame::allocate(int i, int64_t n) {
  DeviceTensor &a = vec(i);
  if (a.empty())
    a.allocateUninitialized(size_t(n));
}

void Frame::release(int i) {
  if (floats[size_t(i)])
    floats[size_t(i)]->clear();
  if (ints[size_t(i)])
    ints[size_t(i)]->clear();
}

} // namespace mist::rt
