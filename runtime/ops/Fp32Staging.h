//===- Fp32Staging.h - fp32 copies of an op's bf16 operands ---------------===//
/// \file
/// The CPU reference kernels (stdlib/kernels) and today's CUDA kernels read
/// and write fp32. An op on bf16 tensors hands them fp32 staging copies for
/// the length of one call: inputs widened (exact), outputs computed in fp32
/// and rounded to their tensor's type once when the op ends, accumulated
/// outputs (`+=`, parameter gradients) widened first and rounded back. That
/// is what a bf16 kernel with fp32 accumulation computes, so a plan's
/// numerics do not depend on which kernels run it; only time and the
/// transient staging memory do (device::allocateStaging, reported apart
/// from the tensors the performance model counts). An fp32 operand is
/// passed through untouched: fp32 plans run exactly as before.
///
/// Operands an op reads through several pointers into one buffer (a fused
/// q/k/v) are staged as one span (`inQkv`, `outQkv`) so that each element
/// is written back once.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/Device.h"
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace mist::rt::ops {

class Fp32Staging {
public:
  Fp32Staging() = default;
  Fp32Staging(const Fp32Staging &) = delete;
  Fp32Staging &operator=(const Fp32Staging &) = delete;
  /// Rounds the staged outputs into their tensors and frees the copies.
  ~Fp32Staging() {
    for (const Staged &s : staged) {
      if (s.writeBack)
        device::convert(s.target, ConstTensor(s.copy, DType::F32), s.n);
      device::releaseStaging(s.copy);
    }
  }

  /// n elements of t, readable as fp32.
  const float *in(ConstTensor t, int64_t n) {
    if (!t.data || t.dtype == DType::F32)
      return static_cast<const float *>(t.data);
    float *copy = stage(Tensor(const_cast<void *>(t.data), t.dtype), n, false);
    device::convert(copy, t, size_t(n));
    return copy;
  }
  /// n elements the op writes (contents undefined until it does).
  float *out(Tensor t, int64_t n) {
    if (!t.data || t.dtype == DType::F32)
      return static_cast<float *>(t.data);
    return stage(t, n, true);
  }
  /// n elements the op adds to.
  float *inout(Tensor t, int64_t n) {
    if (!t.data || t.dtype == DType::F32)
      return static_cast<float *>(t.data);
    float *copy = stage(t, n, true);
    device::convert(copy, t, size_t(n));
    return copy;
  }

  /// The q, k and v operands of attention (or their gradients, written),
  /// `tokens` rows each at strides qStride / kvStride of widths qWidth /
  /// kvWidth. Parts that point into one token row of one buffer (a fused
  /// q/k/v) are staged as one span, so each element is written back once.
  std::array<const float *, 3> inQkv(ConstTensor q, ConstTensor k, ConstTensor v, int64_t tokens,
                                     int64_t qStride, int64_t kvStride, int64_t qWidth,
                                     int64_t kvWidth) {
    const Layout l = layoutOf(q, k, v, tokens, qStride, kvStride, qWidth, kvWidth);
    if (!l.fused)
      return {in(q, l.q), in(k, l.k), in(v, l.v)};
    const float *base = in(l.base, l.span);
    return {base + offset(l.base, q), base + offset(l.base, k), base + offset(l.base, v)};
  }
  std::array<float *, 3> outQkv(Tensor q, Tensor k, Tensor v, int64_t tokens, int64_t qStride,
                                int64_t kvStride, int64_t qWidth, int64_t kvWidth) {
    const Layout l = layoutOf(q, k, v, tokens, qStride, kvStride, qWidth, kvWidth);
    if (!l.fused)
      return {out(q, l.q), out(k, l.k), out(v, l.v)};
    float *base = out(Tensor(const_cast<void *>(l.base.data), l.base.dtype), l.span);
    return {base + offset(l.base, q), base + offset(l.base, k), base + offset(l.base, v)};
  }

private:
  struct Staged {
    float *copy;
    Tensor target;
    size_t n;
    bool writeBack;
  };
  float *stage(Tensor target, int64_t n, bool writeBack) {
    float *copy = static_cast<float *>(device::allocateStaging(size_t(n) * sizeof(float)));
    staged.push_back({copy, target, size_t(n), writeBack});
    return copy;
  }
  struct Layout {
    bool fused;
    ConstTensor base; ///< fused: the lowest of the three
    int64_t span;     ///< fused: elements from base to the end of the last row
    int64_t q, k, v;  ///< otherwise: each part's elements to the end of its last row
  };
  static Layout layoutOf(ConstTensor q, ConstTensor k, ConstTensor v, int64_t tokens,
                         int64_t qStride, int64_t kvStride, int64_t qWidth, int64_t kvWidth) {
    Layout l{false,
             q,
             0,
             (tokens - 1) * qStride + qWidth,
             (tokens - 1) * kvStride + kvWidth,
             (tokens - 1) * kvStride + kvWidth};
    if (q.dtype == DType::F32 || qStride != kvStride || k.dtype != q.dtype || v.dtype != q.dtype)
      return l;
    for (ConstTensor p : {k, v})
      if (p.data < l.base.data)
        l.base = p;
    int64_t end = 0; // the farthest element of one row past the base
    for (auto [p, width] : {std::pair{q, qWidth}, std::pair{k, kvWidth}, std::pair{v, kvWidth}})
      end = std::max(end, offset(l.base, p) + width);
    l.fused = end <= qStride; // all three within one row
    l.span = (tokens - 1) * qStride + end;
    return l;
  }
  static int64_t offset(ConstTensor base, ConstTensor part) {
    return (static_cast<const std::byte *>(part.data) - static_cast<const std::byte *>(base.data)) /
           int64_t(bytesOf(base.dtype));
  }
  std::vector<Staged> staged;
};

} // namespace mist::rt::ops
