//===- LayerNorm.h - LayerNorm over the last axis -------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// T is the storage type of the activations and parameters: float here; the
/// CUDA kernels also take bf16 (LayerNormCuda.h). Statistics and parameter
/// gradients are fp32 in either case.
template <typename T> struct LayerNormArgsOf {
  T *out;                 ///< [N, C]
  float *mean, *rstd;     ///< [N], saved for backward
  const T *inp;           ///< [N, C]
  const T *weight, *bias; ///< [C]; bias may be null
  T *dinp;                ///< [N, C], = in backward
  float *dweight, *dbias; ///< [C], += in backward; dbias may be null
  const T *dout;          ///< [N, C]
  Index rows, channels;
  float eps;
};
using LayerNormArgs = LayerNormArgsOf<float>;
void layerNormFwdRef(const LayerNormArgs &a);
void layerNormBwdRef(const LayerNormArgs &a);

} // namespace mist::kernels
