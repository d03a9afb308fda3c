//===- DeviceTensor.cpp - An owned, typed array of device memory ----------===//
#include "runtime/device/DeviceTensor.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <utility>

namespace mist::rt {

[[noreturn]] void abortNotF32(DType actual) {
  abortJob(std::string("a ") + nameOf(actual) +
           " buffer was used where the runtime needs fp32 (a caller assumed 4-byte elements)");
}

DeviceTensor DeviceTensor::view(void *data, size_t count, DType type) {
  DeviceTensor t(type);
  t.ptr = data;
  t.n = count;
  t.owner = false;
  return t;
}

DeviceTensor &DeviceTensor::operator=(const DeviceTensor &other) {
  if (this == &other)
    return *this;
  if (type != other.type) {
    if (!owner)
      abortJob("a view of an arena cannot change its element type");
    clear();
    type = other.type;
  }
  reallocate(other.n); // a view only takes values of its own size
  device::copy(ptr, other.ptr, bytes());
  return *this;
}

void DeviceTensor::swap(DeviceTensor &other) noexcept {
  std::swap(ptr, other.ptr);
  std::swap(n, other.n);
  std::swap(type, other.type);
  std::swap(owner, other.owner);
}

void DeviceTensor::setDType(DType t) {
  if (t == type)
    return;
  if (!empty())
    abortJob("the element type of a tensor in use cannot change");
  type = t;
}

void DeviceTensor::assignZeros(size_t count) {
  reallocate(count);
  device::fillZero(ptr, bytes());
}

void DeviceTensor::reallocate(size_t count) {
  if (count == n)
    return;
  if (!owner)
    abortJob("a view of an arena cannot be resized");
  device::release(ptr);
  ptr = device::allocate(count * bytesOf(type), "a tensor");
  n = count;
}

void DeviceTensor::resize(size_t count) {
  if (count == n)
    return;
  if (!owner)
    abortJob("a view of an arena cannot be resized");
  void *fresh = device::allocate(count * bytesOf(type), "a tensor");
  device::copy(fresh, ptr, std::min(n, count) * bytesOf(type));
  device::release(ptr);
  ptr = fresh;
  n = count;
}

void DeviceTensor::upload(const std::vector<float> &values) {
  reallocate(values.size());
  if (type == DType::F32) {
    device::copy(ptr, values.data(), bytes());
  } else {
    std::vector<uint16_t> rounded(values.size());
    std::transform(values.begin(), values.end(), rounded.begin(), toBf16);
    device::copy(ptr, rounded.data(), bytes());
  }
  device::synchronizeStream(device::currentStream());
}

std::vector<float> DeviceTensor::download() const {
  std::vector<float> out(n);
  if (type == DType::F32) {
    device::copy(out.data(), ptr, bytes());
    device::synchronizeStream(device::currentStream());
    return out;
  }
  std::vector<uint16_t> bits(n);
  device::copy(bits.data(), ptr, bytes());
  device::synchronizeStream(device::currentStream());
  std::transform(bits.begin(), bits.end(), out.begin(), fromBf16);
  return out;
}

} // namespace mist::rt
