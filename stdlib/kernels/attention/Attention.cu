//===- Attention.cu - Flash attention forward and backward, fp32 ----------===//
/// \file
/// Tiles of kTile = 32 query rows and 32 keys, blocks of 4 warps. A warp owns
/// 8 query rows; for scores its 32 lanes are the 32 keys of the tile (lane c
/// computes q_r · k_c from shared memory, K padded to D + 1 floats a row so
/// the lanes hit distinct banks); for outputs its lanes own the dims
/// lane + 32 j of the head. Shared memory is dynamic (the D = 128 kernels
/// need more than the 48 KiB static limit).
///
/// Forward, one block per (query tile, head, batch): online softmax over the
/// key tiles (up to the diagonal when causal), running max m and sum l per
/// row in registers, out = o / l, lse = m + log l.
///
/// Backward (flash attention 2, split in two kernels so that neither needs
/// atomics: deterministic, and dq, dk, dv are assigned, which a fused dqkv
/// buffer with strides needs anyway). Both recompute P = exp(s - lse) and
/// dS = P (dP - D_i) / √D with D_i = Σ_d dout·out of the row (recomputed per
/// tile from out and dout rather than stored, so no scratch buffer):
///   dk/dv kernel, one block per (kv tile, kv head, batch): loops over the
///     query heads of the group and the query tiles, dv += Pᵀ dout,
///     dk += dSᵀ q in registers;
///   dq kernel, one block per (query tile, head, batch): loops over the key
///     tiles, dq += dS k in registers.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/attention/AttentionCuda.h"

#include "stdlib/kernels/BlockReduce.cuh"

#include <cmath>

namespace mist::kernels {

namespace {

using mist::kernels::cuda::warpMax;
using mist::kernels::cuda::warpSum;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kTile = 32;                    ///< query rows of a block and keys of a tile
constexpr int kRowsPerWarp = kTile / kWarps; ///< query rows a warp owns
constexpr int kKeysPerWarp = kTile / kWarps; ///< keys a warp accumulates dk, dv of
constexpr unsigned kFullMask = 0xffffffffu;
constexpr Index kMaxGridYZ = 65535;

/// Copies the D floats of one head for tokens t0 .. t0 + kTile - 1 of batch b
/// to shared memory rows of `pitch` floats; rows past the sequence are zero.
template <int D>
__device__ void loadTile(float *dst, int pitch, const float *src, Index b, Index t0, Index seq,
                         Index stride, Index headOffset) {
  for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
    int r = i / D, d = i % D;
    Index t = t0 + r;
    dst[r * pitch + d] = t < seq ? src[(b * seq + t) * stride + headOffset + d] : 0.f;
  }
}

/// Last key (exclusive) a query tile starting at q0 attends to.
__device__ inline Index keyEnd(const AttentionArgs &a, Index q0) {
  return a.causal ? min(a.seq, q0 + kTile) : a.seq;
}

__device__ inline bool attends(const AttentionArgs &a, Index t, Index key) {
  return t < a.seq && key < a.seq && (!a.causal || key <= t);
}

/// s[r] += q_r · k_lane over the tile (q rows of this warp, pitch D; k rows pitch D + 1).
template <int D>
__device__ inline void tileDots(float (&s)[kRowsPerWarp], const float *rows, const float *keys,
                                int warp, int lane) {
#pragma unroll 4
  for (int d = 0; d < D; ++d) {
    float kd = keys[lane * (D + 1) + d];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      s[r] += rows[(warp * kRowsPerWarp + r) * D + d] * kd;
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <int D> constexpr size_t forwardSharedBytes() {
  return sizeof(float) * (kTile * D + kTile * (D + 1) + kTile * D);
}

template <int D>
__global__ void __launch_bounds__(kThreads) attentionFwdKernel(AttentionArgs a, float scale) {
  constexpr int R = kRowsPerWarp, L = D / 32;
  extern __shared__ float shared[];
  float *qs = shared, *ks = qs + kTile * D, *vs = ks + kTile * (D + 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Index b = blockIdx.z, h = blockIdx.y, q0 = Index(blockIdx.x) * kTile;
  const Index g = h / (a.heads / a.kvHeads), seq = a.seq;

  loadTile<D>(qs, D, a.q, b, q0, seq, a.qStride, h * D);
  float m[R], l[R], o[R][L];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int j = 0; j < L; ++j)
      o[r][j] = 0.f;
  }

  const Index end = keyEnd(a, q0);
  for (Index k0 = 0; k0 < end; k0 += kTile) {
    __syncthreads(); // the previous tile is consumed
    loadTile<D>(ks, D + 1, a.k, b, k0, seq, a.kvStride, g * D);
    loadTile<D>(vs, D, a.v, b, k0, seq, a.kvStride, g * D);
    __syncthreads();

    float s[R] = {};
    tileDots<D>(s, qs, ks, warp, lane);
    const Index key = k0 + lane;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool valid = attends(a, q0 + warp * R + r, key);
      const float x = valid ? s[r] * scale : -INFINITY;
      const float mNew = fmaxf(m[r], warpMax(x));
      const float p = valid ? expf(x - mNew) : 0.f; // valid: mNew is finite
      const float alpha = m[r] == -INFINITY ? 0.f : expf(m[r] - mNew);
      l[r] = l[r] * alpha + warpSum(p);
      m[r] = mNew;
#pragma unroll
      for (int j = 0; j < L; ++j)
        o[r][j] *= alpha;
      s[r] = p;
    }
    // o_r += Σ_c p_rc v_c: lane c's p broadcast by shuffles.
#pragma unroll 4
    for (int c = 0; c < kTile; ++c) {
      float vc[L];
#pragma unroll
      for (int j = 0; j < L; ++j)
        vc[j] = vs[c * D + lane + 32 * j];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float p = __shfl_sync(kFullMask, s[r], c);
#pragma unroll
        for (int j = 0; j < L; ++j)
          o[r][j] += p * vc[j];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Index t = q0 + warp * R + r;
    if (t >= seq)
      continue;
    // Every row t < seq saw key 0, so l >= 1.
    const float inv = 1.f / l[r];
    float *out = a.out + ((b * seq + t) * a.heads + h) * D;
#pragma unroll
    for (int j = 0; j < L; ++j)
      out[lane + 32 * j] = o[r][j] * inv;
    if (lane == 0 && a.lse)
      a.lse[(b * a.heads + h) * seq + t] = m[r] + logf(l[r]);
  }
}

//===----------------------------------------------------------------------===//
// Backward: dq
//===----------------------------------------------------------------------===//

template <int D> constexpr size_t dqSharedBytes() {
  return sizeof(float) * (2 * kTile * D + 2 * kTile * (D + 1));
}

template <int D>
__global__ void __launch_bounds__(kThreads) attentionBwdDqKernel(AttentionArgs a, float scale) {
  constexpr int R = kRowsPerWarp, L = D / 32;
  extern __shared__ float shared[];
  float *qs = shared, *dos = qs + kTile * D, *ks = dos + kTile * D, *vs = ks + kTile * (D + 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Index b = blockIdx.z, h = blockIdx.y, q0 = Index(blockIdx.x) * kTile;
  const Index g = h / (a.heads / a.kvHeads), seq = a.seq, rowStride = a.heads * D;

  loadTile<D>(qs, D, a.q, b, q0, seq, a.qStride, h * D);
  loadTile<D>(dos, D, a.dout, b, q0, seq, rowStride, h * D);
  __syncthreads();

  float lse[R], di[R], dq[R][L];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = warp * R + r;
    const Index t = q0 + row;
    float part = 0.f;
    if (t < seq) {
      const float *out = a.out + (b * seq + t) * rowStride + h * D;
#pragma unroll
      for (int j = 0; j < L; ++j)
        part += dos[row * D + lane + 32 * j] * out[lane + 32 * j];
    }
    di[r] = warpSum(part);
    lse[r] = t < seq ? a.lse[(b * a.heads + h) * seq + t] : 0.f;
#pragma unroll
    for (int j = 0; j < L; ++j)
      dq[r][j] = 0.f;
  }

  const Index end = keyEnd(a, q0);
  for (Index k0 = 0; k0 < end; k0 += kTile) {
    __syncthreads();
    loadTile<D>(ks, D + 1, a.k, b, k0, seq, a.kvStride, g * D);
    loadTile<D>(vs, D + 1, a.v, b, k0, seq, a.kvStride, g * D);
    __syncthreads();

    float s[R] = {}, dp[R] = {};
    tileDots<D>(s, qs, ks, warp, lane);
    tileDots<D>(dp, dos, vs, warp, lane);
    const Index key = k0 + lane;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool valid = attends(a, q0 + warp * R + r, key);
      const float p = valid ? expf(s[r] * scale - lse[r]) : 0.f;
      s[r] = p * (dp[r] - di[r]) * scale; // dS
    }
#pragma unroll 4
    for (int c = 0; c < kTile; ++c) {
      float kc[L];
#pragma unroll
      for (int j = 0; j < L; ++j)
        kc[j] = ks[c * (D + 1) + lane + 32 * j];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float ds = __shfl_sync(kFullMask, s[r], c);
#pragma unroll
        for (int j = 0; j < L; ++j)
          dq[r][j] += ds * kc[j];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Index t = q0 + warp * R + r;
    if (t >= seq)
      continue;
    float *dq0 = a.dq + (b * seq + t) * a.qStride + h * D;
#pragma unroll
    for (int j = 0; j < L; ++j)
      dq0[lane + 32 * j] = dq[r][j];
  }
}

//===----------------------------------------------------------------------===//
// Backward: dk, dv
//===----------------------------------------------------------------------===//

template <int D> constexpr size_t dkvSharedBytes() {
  return sizeof(float) * (2 * kTile * (D + 1) + 2 * kTile * D + 2 * kTile * kTile);
}

template <int D>
__global__ void __launch_bounds__(kThreads) attentionBwdDkvKernel(AttentionArgs a, float scale) {
  constexpr int R = kRowsPerWarp, L = D / 32, C = kKeysPerWarp;
  extern __shared__ float shared[];
  float *ks = shared, *vs = ks + kTile * (D + 1), *qs = vs + kTile * (D + 1), *dos = qs + kTile * D,
        *ps = dos + kTile * D, *dss = ps + kTile * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Index b = blockIdx.z, g = blockIdx.y, k0 = Index(blockIdx.x) * kTile;
  const Index seq = a.seq, group = a.heads / a.kvHeads, rowStride = a.heads * D;

  loadTile<D>(ks, D + 1, a.k, b, k0, seq, a.kvStride, g * D);
  loadTile<D>(vs, D + 1, a.v, b, k0, seq, a.kvStride, g * D);

  float dk[C][L], dv[C][L];
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int j = 0; j < L; ++j)
      dk[c][j] = dv[c][j] = 0.f;

  const Index key = k0 + lane;
  // Causal: rows before the tile's first key see none of its keys.
  const Index qBegin = a.causal ? k0 / kTile * kTile : 0;
  for (Index h = g * group; h < (g + 1) * group; ++h)
    for (Index q0 = qBegin; q0 < seq; q0 += kTile) {
      __syncthreads(); // the previous query tile is consumed
      // Each warp loads its rows of q and dout and computes their D_i.
      float lse[R], di[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = warp * R + r;
        const Index t = q0 + row;
        const bool inside = t < seq;
        float part = 0.f;
#pragma unroll
        for (int j = 0; j < L; ++j) {
          const int d = lane + 32 * j;
          const Index at = (b * seq + t) * rowStride + h * D + d;
          const float dy = inside ? a.dout[at] : 0.f;
          qs[row * D + d] = inside ? a.q[(b * seq + t) * a.qStride + h * D + d] : 0.f;
          dos[row * D + d] = dy;
          part += inside ? dy * a.out[at] : 0.f;
        }
        di[r] = warpSum(part);
        lse[r] = inside ? a.lse[(b * a.heads + h) * seq + t] : 0.f;
      }
      __syncthreads(); // ks and vs (first pass), qs and dos

      float s[R] = {}, dp[R] = {};
      tileDots<D>(s, qs, ks, warp, lane);
      tileDots<D>(dp, dos, vs, warp, lane);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = warp * R + r;
        const bool valid = attends(a, q0 + row, key);
        const float p = valid ? expf(s[r] * scale - lse[r]) : 0.f;
        ps[row * kTile + lane] = p;
        dss[row * kTile + lane] = p * (dp[r] - di[r]) * scale;
      }
      __syncthreads();

      // dv_c += Σ_rows p_rc dout_r, dk_c += Σ_rows dS_rc q_r for this warp's keys.
#pragma unroll 2
      for (int row = 0; row < kTile; ++row) {
        float qd[L], dy[L];
#pragma unroll
        for (int j = 0; j < L; ++j) {
          qd[j] = qs[row * D + lane + 32 * j];
          dy[j] = dos[row * D + lane + 32 * j];
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
          const float p = ps[row * kTile + warp * C + c], ds = dss[row * kTile + warp * C + c];
#pragma unroll
          for (int j = 0; j < L; ++j) {
            dv[c][j] += p * dy[j];
            dk[c][j] += ds * qd[j];
          }
        }
      }
    }

#pragma unroll
  for (int c = 0; c < C; ++c) {
    const Index t = k0 + warp * C + c;
    if (t >= seq)
      continue;
    const Index at = (b * seq + t) * a.kvStride + g * D;
#pragma unroll
    for (int j = 0; j < L; ++j) {
      a.dk[at + lane + 32 * j] = dk[c][j];
      a.dv[at + lane + 32 * j] = dv[c][j];
    }
  }
}

//===----------------------------------------------------------------------===//
// Launching
//===----------------------------------------------------------------------===//

/// Validates what both directions share; sets `empty` when there is no work.
cudaError_t checkShape(const AttentionArgs &a, bool &empty) {
  if (!attentionCudaSupportsHeadDim(a.headDim) || a.batch < 0 || a.seq < 0 || a.heads < 1 ||
      a.kvHeads < 1 || a.heads % a.kvHeads != 0 || a.heads > kMaxGridYZ || a.batch > kMaxGridYZ ||
      a.qStride < a.heads * a.headDim || a.kvStride < a.kvHeads * a.headDim)
    return cudaErrorInvalidValue;
  empty = a.batch == 0 || a.seq == 0;
  return cudaSuccess;
}

template <typename Kernel>
cudaError_t launch(Kernel *kernel, unsigned tiles, Index heads, const AttentionArgs &a,
                   size_t sharedBytes, cudaStream_t stream) {
  if (cudaError_t rc = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(sharedBytes));
      rc != cudaSuccess)
    return rc;
  dim3 grid(tiles, unsigned(heads), unsigned(a.batch));
  kernel<<<grid, kThreads, sharedBytes, stream>>>(a, 1.f / sqrtf(float(a.headDim)));
  return cudaGetLastError();
}

unsigned tilesOf(Index seq) { return unsigned((seq + kTile - 1) / kTile); }

template <int D> cudaError_t forward(const AttentionArgs &a, cudaStream_t stream) {
  return launch(attentionFwdKernel<D>, tilesOf(a.seq), a.heads, a, forwardSharedBytes<D>(), stream);
}

template <int D> cudaError_t backward(const AttentionArgs &a, cudaStream_t stream) {
  if (cudaError_t rc = launch(attentionBwdDkvKernel<D>, tilesOf(a.seq), a.kvHeads, a,
                              dkvSharedBytes<D>(), stream);
      rc != cudaSuccess)
    return rc;
  return launch(attentionBwdDqKernel<D>, tilesOf(a.seq), a.heads, a, dqSharedBytes<D>(), stream);
}

} // namespace

bool attentionCudaSupportsHeadDim(Index headDim) { return headDim == 64 || headDim == 128; }

cudaError_t attentionFwdCuda(const AttentionArgs &a, cudaStream_t stream) {
  bool empty = false;
  if (cudaError_t rc = checkShape(a, empty); rc != cudaSuccess)
    return rc;
  if (empty)
    return cudaSuccess;
  if (!a.out || !a.q || !a.k || !a.v)
    return cudaErrorInvalidValue;
  return a.headDim == 64 ? forward<64>(a, stream) : forward<128>(a, stream);
}

cudaError_t attentionBwdCuda(const AttentionArgs &a, cudaStream_t stream) {
  bool empty = false;
  if (cudaError_t rc = checkShape(a, empty); rc != cudaSuccess)
    return rc;
  if (empty)
    return cudaSuccess;
  if (!a.out || !a.lse || !a.q || !a.k || !a.v || !a.dq || !a.dk || !a.dv || !a.dout)
    return cudaErrorInvalidValue;
  return a.headDim == 64 ? backward<64>(a, stream) : backward<128>(a, stream);
}

} // namespace mist::kernels
