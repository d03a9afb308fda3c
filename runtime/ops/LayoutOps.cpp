//===- LayoutOps.cpp - slice and concat along the last axis ---------------===//
/// \file
/// The layout ops move bytes and compute nothing, so one implementation
/// serves every device: strided row copies (device::copyRows, a loop of
/// memcpy on CPU ranks, cudaMemcpy2DAsync on GPUs) on the current stream.
/// Linked into both op libraries (runtime/ops/CMakeLists.txt).
//===----------------------------------------------------------------------===//
#include "runtime/device/Device.h"
#include "runtime/ops/Ops.h"

#include <cstdio>
#include <cstdlib>

namespace mist::rt::ops {

namespace {

/// The ops copy bytes as they are: a conversion here would be a bug in the
/// emitted code (the IR gives a slice its input's dtype).
void requireSameType(DType a, DType b, const char *op) {
  if (a != b) {
    std::fprintf(stderr, "mistrt: %s between tensors of different dtypes\n", op);
    std::abort();
  }
}

} // namespace

void sliceLast(Tensor out, ConstTensor x, Index rows, Index width, Index start, Index size) {
  requireSameType(out.dtype, x.dtype, "sliceLast");
  const size_t e = bytesOf(x.dtype);
  device::copyRows(out.data, size_t(size) * e, (x + start).data, size_t(width) * e,
                   size_t(size) * e, size_t(rows));
}

void sliceLastGrad(Tensor dx, ConstTensor dout, Index rows, Index width, Index start, Index size) {
  requireSameType(dx.dtype, dout.dtype, "sliceLastGrad");
  const size_t e = bytesOf(dx.dtype);
  device::fillZero(dx.data, size_t(rows) * size_t(width) * e);
  device::copyRows((dx + start).data, size_t(width) * e, dout.data, size_t(size) * e,
                   size_t(size) * e, size_t(rows));
}

void concatLast(Tensor out, ConstTensor a, ConstTensor b, Index rows, Index aWidth, Index bWidth) {
  requireSameType(out.dtype, a.dtype, "concatLast");
  requireSameType(out.dtype, b.dtype, "concatLast");
  const size_t e = bytesOf(out.dtype), pitch = size_t(aWidth + bWidth) * e;
  device::copyRows(out.data, pitch, a.data, size_t(aWidth) * e, size_t(aWidth) * e, size_t(rows));
  device::copyRows((out + aWidth).data, pitch, b.data, size_t(bWidth) * e, size_t(bWidth) * e,
                   size_t(rows));
}

void concatLastGrad(Tensor da, Tensor db, ConstTensor dout, Index rows, Index aWidth,
                    Index bWidth) {
  requireSameType(da.dtype, dout.dtype, "concatLastGrad");
  requireSameType(db.dtype, dout.dtype, "concatLastGrad");
  const size_t e = bytesOf(dout.dtype), pitch = size_t(aWidth + bWidth) * e;
  device::copyRows(da.data, size_t(aWidth) * e, dout.data, pitch, size_t(aWidth) * e, size_t(rows));
  device::copyRows(db.data, size_t(bWidth) * e, (dout + aWidth).data, pitch, size_t(bWidth) * e,
                   size_t(rows));
}

} // namespace mist::rt::ops
