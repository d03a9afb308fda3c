//===- RMSNorm.h - RMSNorm over the last axis -----------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// T is the storage type of the activations and the weight: float here; the
/// CUDA kernels also take bf16 (RMSNormCuda.h). rstd and dweight are fp32.
template <typename T> struct RMSNormArgsOf {
  T *out;          ///< [N, C]
  float *rstd;     ///< [N], saved for backward
  const T *inp;    ///< [N, C]
  const T *weight; ///< [C]
  T *dinp;         ///< [N, C], = in backward
  float *dweight;  ///< [C], += in backward
  const T *dout;   ///< [N, C]
  Index rows, channels;
  float eps;
};
using RMSNormArgs = RMSNormArgsOf<float>;
void rmsNormFwdRef(const RMSNormArgs &a);
void rmsNormBwdRef(const RMSNormArgs &a);

} // namespace mist::kernels
