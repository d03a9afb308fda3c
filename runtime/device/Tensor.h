//===- Tensor.h - A typed pointer into device memory ----------------------===//
/// \file
/// What the ops, the collectives and the device primitives take for a
/// floating-point buffer: its address and element type. `t + n` is n
/// elements further (so train.cu's `L.at(buf::qkv) + hidden` addresses the
/// k part of a fused q/k/v in either precision). A `float *` converts to an
/// fp32 Tensor, so code and tests that hold plain fp32 buffers call the same
/// functions; `f32()` gives the float pointer back and ends the job if the
/// tensor is not fp32 (a caller that assumed 4-byte elements).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/DType.h"
#include <cstddef>
#include <cstdint>

namespace mist::rt {

/// Ends the job: a buffer of type `actual` was read as fp32 (DeviceTensor.cpp).
[[noreturn]] void abortNotF32(DType actual);

struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;

  Tensor() = default;
  Tensor(std::nullptr_t) {}
  Tensor(float *p) : data(p) {}
  Tensor(void *p, DType t) : data(p), dtype(t) {}

  explicit operator bool() const { return data != nullptr; }
  Tensor operator+(int64_t elements) const {
    return {static_cast<std::byte *>(data) + elements * int64_t(bytesOf(dtype)), dtype};
  }
  float *f32() const {
    if (data && dtype != DType::F32)
      abortNotF32(dtype);
    return static_cast<float *>(data);
  }
};

struct ConstTensor {
  const void *data = nullptr;
  DType dtype = DType::F32;

  ConstTensor() = default;
  ConstTensor(std::nullptr_t) {}
  ConstTensor(const float *p) : data(p) {}
  ConstTensor(const void *p, DType t) : data(p), dtype(t) {}
  ConstTensor(Tensor t) : data(t.data), dtype(t.dtype) {}

  explicit operator bool() const { return data != nullptr; }
  ConstTensor operator+(int64_t elements) const {
    return {static_cast<const std::byte *>(data) + elements * int64_t(bytesOf(dtype)), dtype};
  }
  const float *f32() const {
    if (data && dtype != DType::F32)
      abortNotF32(dtype);
    return static_cast<const float *>(data);
  }
};

} // namespace mist::rt
