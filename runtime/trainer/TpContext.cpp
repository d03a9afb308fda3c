//===- TpContext.cpp - What the generated code needs of its tp group ------===//
#include "runtime/trainer/TpContext.h"

#include "runtime/ops/Ops.h"

namespace mist::rt {

void TpContext::allReduce(Tensor out, ConstTensor in, int64_t n) {
  if (out.data != in.data)
    device::convert(out, in, size_t(n));
  if (size() > 1)
    tp->allReduceSum(out.data, size_t(n), out.dtype);
}

// Both sides of sequence parallelism's collectives have the activations'
// type (the IR's values are one dtype), so nothing converts here.
void TpContext::allGather(Tensor out, ConstTensor in, int64_t n) {
  if (size() == 1) {
    if (out.data != in.data)
      device::convert(out, in, size_t(n));
    return;
  }
  tp->allGather(in.data, out.data, size_t(n), out.dtype);
}

void TpContext::reduceScatter(Tensor out, ConstTensor in, int64_t n) {
  if (size() == 1) {
    if (out.data != in.data)
      device::convert(out, in, size_t(n));
    return;
  }
  tp->reduceScatterSum(in.data, out.data, size_t(n), out.dtype);
}

void TpContext::crossEntropy(Tensor loss, Tensor stats, ConstTensor logits, const int32_t *targets,
                             int64_t rows, int64_t vocab, bool vocabParallel) {
  const bool split = vocabParallel && size() > 1;
  const size_t n = size_t(rows);
  if (rowMax.size() != n) {
    rowMax.assignZeros(n);
    sumExp.assignZeros(n);
    targetLogit.assignZeros(n);
  }
  ops::crossEntropyRowMax(rowMax.data(), logits, rows, vocab);
  if (split) { // the max over the group, from every rank's row maxima
    if (gathered.size() != n * size_t(size()))
      gathered.assignZeros(n * size_t(size()));
    tp->allGather(rowMax.data(), gathered.data(), n);
    ops::maxOverBlocks(rowMax.data(), gathered.data(), size(), rows);
  }
  ops::crossEntropyRowSums(sumExp.data(), targetLogit.data(), logits, targets, rowMax.data(), rows,
                           vocab, split ? rank() * vocab : 0);
  if (split) {
    tp->allReduceSum(sumExp.data(), n);
    tp->allReduceSum(targetLogit.data(), n);
  }
  ops::crossEntropyFinish(loss, stats, rowMax.data(), sumExp.data(), targetLogit.data(), rows);
}

void TpContext::crossEntropyGrad(Tensor dlogits, ConstTensor dloss, ConstTensor logits,
                                 const int32_t *targets, ConstTensor stats, int64_t rows,
                                 int64_t vocab, bool vocabParallel) {
  ops::crossEntropyGrad(dlogits, dloss, logits, targets, stats, rows, vocab,
                        vocabParallel && size() > 1 ? rank() * vocab : 0);
}

} // namespace mist::rt
