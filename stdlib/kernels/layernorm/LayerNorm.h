//===- LayerNorm.h - LayerNorm over the last axis -------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

struct LayerNormArgs {
  float *out;                 ///< [N, C]
  float *mean, *rstd;         ///< [N], saved for backward
  const float *inp;           ///< [N, C]
  const float *weight, *bias; ///< [C]; bias may be null
  float *dinp;                ///< [N, C], = in backward
  float *dweight, *dbias;     ///< [C], += in backward; dbias may be null
  const float *dout;          ///< [N, C]
  Index rows, channels;
  float eps;
};
void layerNormFwdRef(const LayerNormArgs &a);
void layerNormBwdRef(const LayerNormArgs &a);

} // namespace mist::kernels
