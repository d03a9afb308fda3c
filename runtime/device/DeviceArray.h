//===- DeviceArray.h - Owned arrays in device and pinned host memory ------===//
/// \file
/// The runtime's tensors: `DeviceArray<T>` owns n elements of device memory
/// (runtime/device/Device.h) and offers the few std::vector-like operations
/// the runtime needs, each one a device operation on the current stream, so
/// the same code runs on CPU and GPU ranks; elements are never touched on
/// the host except through `upload` and `download`. `HostArray<T>` owns
/// pinned host memory that keeps its capacity when emptied, so offloading
/// a tensor every step allocates nothing after the first.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/Device.h"
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace mist::rt {

[[noreturn]] void abortJob(const std::string &why); // runtime/comm/MpiCommunicator.h

template <class T> class DeviceArray {
public:
  DeviceArray() = default;
  /// A view of n elements of memory another array owns (a slice of an
  /// arena): it is never freed, and resizing it is a bug that ends the job.
  static DeviceArray view(T *data, size_t count) {
    DeviceArray a;
    a.ptr = data;
    a.n = count;
    a.owner = false;
    return a;
  }
  ~DeviceArray() {
    if (owner)
      device::release(ptr);
  }
  DeviceArray(const DeviceArray &other) { *this = other; }
  DeviceArray &operator=(const DeviceArray &other) {
    if (this != &other) {
      reallocate(other.n);
      device::copy(ptr, other.ptr, n * sizeof(T));
    }
    return *this;
  }
  DeviceArray(DeviceArray &&other) noexcept { swap(other); }
  DeviceArray &operator=(DeviceArray &&other) noexcept {
    swap(other);
    return *this;
  }

  T *data() { return ptr; }
  const T *data() const { return ptr; }
  size_t size() const { return n; }
  /// Whether this is a view of memory another array owns.
  bool isView() const { return !owner; }
  bool empty() const { return n == 0; }
  void swap(DeviceArray &other) noexcept {
    std::swap(ptr, other.ptr);
    std::swap(n, other.n);
    std::swap(owner, other.owner);
  }

  /// n elements, all zero.
  void assignZeros(size_t count) {
    reallocate(count);
    fillZero();
  }
  /// n elements, contents undefined (for buffers that are written before
  /// they are read: no fill pass over the memory).
  void allocateUninitialized(size_t count) { reallocate(count); }
  /// n elements, the first min(n, size()) kept, the rest undefined.
  void resize(size_t count) {
    if (count == n)
      return;
    if (!owner)
      abortJob("a view of an arena cannot be resized");
    T *fresh = static_cast<T *>(device::allocate(count * sizeof(T), "a tensor"));
    device::copy(fresh, ptr, std::min(n, count) * sizeof(T));
    device::release(ptr);
    ptr = fresh;
    n = count;
  }
  /// Frees the memory.
  void clear() { DeviceArray().swap(*this); }

  /// Copies host values in (the device array takes their size) and waits,
  /// so `values` may go away at once.
  void upload(const std::vector<T> &values) {
    reallocate(values.size());
    device::copy(ptr, values.data(), n * sizeof(T));
    device::synchronizeStream(device::currentStream());
  }
  /// The values, copied out after the work enqueued so far on the stream.
  std::vector<T> download() const {
    std::vector<T> out(n);
    device::copy(out.data(), ptr, n * sizeof(T));
    device::synchronizeStream(device::currentStream());
    return out;
  }

private:
  void fillZero();
  void reallocate(size_t count) {
    if (count == n)
      return;
    if (!owner)
      abortJob("a view of an arena cannot be resized");
    device::release(ptr);
    ptr = static_cast<T *>(device::allocate(count * sizeof(T), "a tensor"));
    n = count;
  }
  T *ptr = nullptr;
  size_t n = 0;
  bool owner = true;
};

// Zero is all-zero bits for every element type the runtime keeps.
template <class T> void DeviceArray<T>::fillZero() { device::fillZero(ptr, n * sizeof(T)); }

/// Pinned host memory for the offloaded parts of tensors.
template <class T> class HostArray {
public:
  HostArray() = default;
  ~HostArray() { device::releasePinned(ptr); }
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;
  HostArray(HostArray &&other) noexcept { swap(other); }
  HostArray &operator=(HostArray &&other) noexcept {
    swap(other);
    return *this;
  }
  void swap(HostArray &other) noexcept {
    std::swap(ptr, other.ptr);
    std::swap(n, other.n);
    std::swap(capacity, other.capacity);
  }

  T *data() { return ptr; }
  const T *data() const { return ptr; }
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  /// Room for `count` elements (contents undefined); keeps a larger block.
  void resize(size_t count) {
    if (count > capacity) {
      device::releasePinned(ptr);
      ptr = static_cast<T *>(device::allocatePinned(count * sizeof(T), "offloaded tensors"));
      capacity = count;
    }
    n = count;
  }
  /// Empty, the memory kept for the next resize.
  void clear() { n = 0; }

private:
  T *ptr = nullptr;
  size_t n = 0, capacity = 0;
};

} // namespace mist::rt
