//===- DeviceTensor.h - An owned, typed array of device memory ------------===//
/// \file
/// The trainer's floating-point tensors (activations, weights, fp32 master
/// weights and moments, gradient sums, ZeRO slices): n elements of one
/// DType in device memory (runtime/device/Device.h), with the few
/// std::vector-like operations the runtime needs, each a device operation on
/// the current stream. Sizes are elements; `bytes()` is what they occupy,
/// so nothing above this class assumes 4 bytes per element. Host values go
/// in and out as fp32 (`upload`, `download`), rounded to the tensor's type
/// on the way in: checkpoints and initialization speak fp32.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/DeviceArray.h"
#include "runtime/device/Tensor.h"
#include <string>
#include <vector>

namespace mist::rt {

class DeviceTensor {
public:
  explicit DeviceTensor(DType type = DType::F32) : type(type) {}
  /// A view of n elements of memory another array owns (a slice of an
  /// arena): never freed; resizing it is a bug that ends the job.
  static DeviceTensor view(void *data, size_t count, DType type);
  ~DeviceTensor() {
    if (owner)
      device::release(ptr);
  }
  /// Copies are deep (the same type, size and values).
  DeviceTensor(const DeviceTensor &other) : type(other.type) { *this = other; }
  DeviceTensor &operator=(const DeviceTensor &other);
  DeviceTensor(DeviceTensor &&other) noexcept { swap(other); }
  DeviceTensor &operator=(DeviceTensor &&other) noexcept {
    swap(other);
    return *this;
  }
  void swap(DeviceTensor &other) noexcept;

  DType dtype() const { return type; }
  /// Changes the element type of an empty tensor (a non-empty one ends the job).
  void setDType(DType t);
  Tensor tensor() { return {ptr, type}; }
  ConstTensor tensor() const { return {ptr, type}; }
  /// The tensor from element `offset` on.
  Tensor at(size_t offset) { return tensor() + int64_t(offset); }
  ConstTensor at(size_t offset) const { return tensor() + int64_t(offset); }
  void *data() { return ptr; }
  const void *data() const { return ptr; }
  /// The elements as fp32 (the job ends if they are not).
  float *f32() { return tensor().f32(); }
  const float *f32() const { return tensor().f32(); }
  size_t size() const { return n; }
  size_t bytes() const { return n * bytesOf(type); }
  bool empty() const { return n == 0; }
  bool isView() const { return !owner; }

  /// n elements, all zero.
  void assignZeros(size_t count);
  /// n elements, contents undefined (for buffers written before they are read).
  void allocateUninitialized(size_t count) { reallocate(count); }
  /// n elements, the first min(n, size()) kept, the rest undefined.
  void resize(size_t count);
  void clear() { DeviceTensor(type).swap(*this); }

  /// Host fp32 values in (rounded to the tensor's type; the tensor takes
  /// their size), and out (widened to fp32), waiting for the copies.
  void upload(const std::vector<float> &values);
  std::vector<float> download() const;

private:
  void reallocate(size_t count);
  void *ptr = nullptr;
  size_t n = 0;
  DType type = DType::F32;
  bool owner = true;
};

/// Pinned host bytes for the offloaded tails of tensors of any type.
using HostBytes = HostArray<std::byte>;

} // namespace mist::rt
