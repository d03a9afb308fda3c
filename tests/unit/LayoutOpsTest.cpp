//===- LayoutOpsTest.cpp - slice and concat in the runtime ----------------===//
/// The runtime's strided-copy slice and concat (runtime/ops/LayoutOps.cpp)
/// against index arithmetic written out here, in fp32 and bf16 (the bytes
/// are moved as they are, so bf16 values come back bit for bit).
//===----------------------------------------------------------------------===//
#include "runtime/ops/Ops.h"

#include <gtest/gtest.h>
#include <vector>

using namespace mist::rt;

namespace {

template <class T> std::vector<T> iota(size_t n, T first) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = T(first + T(i));
  return v;
}

TEST(LayoutOps, SliceAndItsGradient) {
  const int64_t rows = 3, width = 10, start = 4, size = 5;
  std::vector<float> x = iota<float>(rows * width, 0.f), out(rows * size, -1.f);
  ops::sliceLast(out.data(), x.data(), rows, width, start, size);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < size; ++j)
      EXPECT_EQ(out[r * size + j], x[r * width + start + j]) << r << "," << j;
  std::vector<float> dout = iota<float>(rows * size, 100.f), dx(rows * width, -1.f);
  ops::sliceLastGrad(dx.data(), dout.data(), rows, width, start, size);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      EXPECT_EQ(dx[r * width + j],
                j >= start && j < start + size ? dout[r * size + j - start] : 0.f)
          << r << "," << j;
}

TEST(LayoutOps, ConcatAndItsGradientInBf16) {
  const int64_t rows = 4, wa = 3, wb = 5;
  std::vector<uint16_t> a = iota<uint16_t>(rows * wa, 1), b = iota<uint16_t>(rows * wb, 1000),
                        out(rows * (wa + wb), 0);
  ops::concatLast({out.data(), DType::BF16}, {a.data(), DType::BF16}, {b.data(), DType::BF16}, rows,
                  wa, wb);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < wa + wb; ++j)
      EXPECT_EQ(out[r * (wa + wb) + j], j < wa ? a[r * wa + j] : b[r * wb + j - wa]);
  std::vector<uint16_t> da(rows * wa, 0), db(rows * wb, 0);
  ops::concatLastGrad({da.data(), DType::BF16}, {db.data(), DType::BF16}, {out.data(), DType::BF16},
                      rows, wa, wb);
  EXPECT_EQ(da, a);
  EXPECT_EQ(db, b);
}

} // namespace
