//===- AdamWCuda.h - CUDA AdamW with fp32 master weights ------------------===//
/// \file
/// The CUDA kernels of AdamW.h: every pointer is device memory, launches are
/// asynchronous on `stream`, and the result is cudaErrorInvalidValue for
/// invalid arguments, else cudaGetLastError() after the launch
/// (stdlib/kernels/README.md, "CUDA kernels"). `param` receives fp32
/// weights, as in the reference (it may equal `master`).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/adamw/AdamW.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

/// One step on one tensor (invalid: n < 0 or step < 1).
cudaError_t adamWCuda(const AdamWArgs &a, cudaStream_t stream);
/// The same writing bf16 weights.
using AdamWBf16Args = AdamWArgsOf<__nv_bfloat16>;
cudaError_t adamWCuda(const AdamWBf16Args &a, cudaStream_t stream);

/// The most tensors one multi-tensor launch takes. The struct travels as a
/// kernel parameter (with a table of block offsets, about 3.4 KB in all), so
/// it must stay within the 4 KB kernel-parameter limit of older toolkits.
constexpr int adamWMaxTensors = 64;

/// One AdamW step on up to adamWMaxTensors tensors in one launch: tensor
/// k has its own master[k], m[k], v[k], param[k], grad[k] and n[k]; the
/// hyperparameters are shared (as one AdamWArgs's are). Longer lists go
/// in several calls.
template <typename T> struct AdamWMultiTensorArgsOf {
  float *master[adamWMaxTensors], *m[adamWMaxTensors], *v[adamWMaxTensors];
  T *param[adamWMaxTensors]; ///< the weights in the training dtype
  const float *grad[adamWMaxTensors];
  Index n[adamWMaxTensors];
  int count = 0; ///< tensors used, 0 ... adamWMaxTensors
  float lr, beta1, beta2, eps, weightDecay, gradScale = 1.f;
  int step; ///< 1-based, for bias correction
};
/// Invalid: count outside [0, adamWMaxTensors], a negative n[k], step < 1,
/// or more than 2^31 - 1 blocks of 1024 elements in all.
using AdamWMultiTensorArgs = AdamWMultiTensorArgsOf<float>;
using AdamWMultiTensorBf16Args = AdamWMultiTensorArgsOf<__nv_bfloat16>;
cudaError_t adamWMultiTensorCuda(const AdamWMultiTensorArgs &a, cudaStream_t stream);
cudaError_t adamWMultiTensorCuda(const AdamWMultiTensorBf16Args &a, cudaStream_t stream);

} // namespace mist::kernels
