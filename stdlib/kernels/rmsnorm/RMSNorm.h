//===- RMSNorm.h - RMSNorm over the last axis -----------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

struct RMSNormArgs {
  float *out;          ///< [N, C]
  float *rstd;         ///< [N], saved for backward
  const float *inp;    ///< [N, C]
  const float *weight; ///< [C]
  float *dinp;         ///< [N, C], = in backward
  float *dweight;      ///< [C], += in backward
  const float *dout;   ///< [N, C]
  Index rows, channels;
  float eps;
};
void rmsNormFwdRef(const RMSNormArgs &a);
void rmsNormBwdRef(const RMSNormArgs &a);

} // namespace mist::kernels
