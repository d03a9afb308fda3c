//===- NormColumnSums.h - A norm's weight and bias gradients from bf16 rows -===//
/// \file
/// The column sums of layernorm's and rmsnorm's backward over bf16 rows of
/// whole 16-byte vectors (VectorRow.cuh), 8 channels a thread:
///   dweight[c] += sum_n dout[n, c] * (inp[n, c] - mean[n]) * rstd[n]
///   dbias[c]   += sum_n dout[n, c]                    (where dbias is set)
/// with mean null for rmsnorm (no centering). Rows are split into chunks
/// (BlockReduce.cuh's columnSumGrid); with several, each chunk's partial
/// sums go to a stream-ordered scratch buffer and are added chunk by chunk
/// in a second pass: deterministic, the same bits every run (the scalar
/// kernels' fp32 atomicAdd is not).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

struct NormColumnSumsArgs {
  const __nv_bfloat16 *dout, *inp;
  const float *mean, *rstd; ///< [rows]; mean null: rmsnorm
  float *dweight, *dbias;   ///< [channels], +=; dbias may be null
  Index rows, channels;     ///< channels a multiple of 8, pointers 16-byte aligned
};

cudaError_t normColumnSumsCuda(const NormColumnSumsArgs &a, cudaStream_t stream);

} // namespace mist::kernels
