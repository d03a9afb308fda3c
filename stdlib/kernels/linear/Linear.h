//===- Linear.h - out = x W + bias ----------------------------------------===//
/// \file
/// W is stored [in, out] as in the IR (`param bf16[in, out]`). Under tensor
/// parallelism the caller passes this rank's slice: columns for a
/// column-parallel layer, rows for a row-parallel one (whose output is then
/// a partial sum; the bias is added by one rank only, `bias` null on others).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

struct LinearArgs {
  float *out;          ///< [N, Out]
  const float *inp;    ///< [N, In]
  const float *weight; ///< [In, Out]
  const float *bias;   ///< [Out] or null
  float *dinp;         ///< [N, In], = in backward (may be null)
  float *dweight;      ///< [In, Out], += in backward
  float *dbias;        ///< [Out], += in backward (may be null)
  const float *dout;   ///< [N, Out]
  Index rows, in, outFeatures;
};
void linearFwdRef(const LinearArgs &a);
void linearBwdRef(const LinearArgs &a);

/// The LM head with a tied table [vocab, channels] (the embedding's layout):
/// logits[rows, vocab] = x table^T; the backward writes dx = dlogits table
/// and accumulates dtable += dlogits^T x. Sums in double.
void lmHeadFwdRef(float *logits, const float *x, const float *table, Index rows, Index channels,
                  Index vocab);
void lmHeadBwdRef(float *dx, float *dtable, const float *dlogits, const float *x,
                  const float *table, Index rows, Index channels, Index vocab);

} // namespace mist::kernels
