//===- TpContext.cpp - What the generated code needs of its tp group ------===//
#include "runtime/trainer/TpContext.h"

#include "stdlib/kernels/crossentropy/CrossEntropy.h"
#include <algorithm>
#include <cmath>
#include <vector>

namespace mist::rt {

void TpContext::allReduce(float *out, const float *in, int64_t n) {
  if (out != in)
    std::copy(in, in + n, out);
  if (size() > 1)
    tp->allReduceSum(out, size_t(n));
}

float TpContext::crossEntropy(float *stats, const float *logits, const int32_t *targets,
                              int64_t rows, int64_t vocab) {
  std::vector<float> rowMax(rows), sumExp(rows), target(rows);
  mist::kernels::CrossEntropyArgs a{logits,  targets, rowMax.data(), sumExp.data(),  target.data(),
                                    nullptr, rows,    vocab,         rank() * vocab, rows,
                                    1.f};
  mist::kernels::crossEntropyMaxRef(a);
  if (size() > 1) { // the max over the group, from every rank's row maxima
    std::vector<float> all(size_t(rows) * size());
    tp->allGather(rowMax.data(), all.data(), size_t(rows));
    for (int64_t n = 0; n < rows; ++n)
      for (int r = 0; r < size(); ++r)
        rowMax[n] = std::max(rowMax[n], all[size_t(r) * rows + n]);
  }
  mist::kernels::crossEntropySumRef(a);
  if (size() > 1) {
    tp->allReduceSum(sumExp.data(), size_t(rows));
    tp->allReduceSum(target.data(), size_t(rows));
  }
  for (int64_t n = 0; n < rows; ++n) {
    stats[2 * n] = rowMax[n];
    stats[2 * n + 1] = rowMax[n] + std::log(sumExp[n]);
  }
  return float(mist::kernels::crossEntropyLossRef(a));
}

void TpContext::crossEntropyGrad(float *dlogits, float dloss, const float *logits,
                                 const int32_t *targets, const float *stats, int64_t rows,
                                 int64_t vocab) {
  std::vector<float> rowMax(rows), sumExp(rows);
  for (int64_t n = 0; n < rows; ++n) {
    rowMax[n] = stats[2 * n];
    sumExp[n] = std::exp(stats[2 * n + 1] - stats[2 * n]);
  }
  mist::kernels::crossEntropyBwdRef({logits, targets, rowMax.data(), sumExp.data(), nullptr,
                                     dlogits, rows, vocab, rank() * vocab, rows, dloss});
}

} // namespace mist::rt
