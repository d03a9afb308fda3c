//===- CrossEntropyRef.cpp - CPU reference of the cross-entropy -----------===//
#include "stdlib/kernels/crossentropy/CrossEntropy.h"

#include <cmath>

namespace mist::kernels {

void crossEntropyMaxRef(const CrossEntropyArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    float m = -INFINITY;
    for (Index v = 0; v < a.vocab; ++v)
      m = std::max(m, a.logits[n * a.vocab + v]);
    a.rowMax[n] = m;
  }
}

void crossEntropySumRef(const CrossEntropyArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    double s = 0;
    for (Index v = 0; v < a.vocab; ++v)
      s += std::exp(double(a.logits[n * a.vocab + v]) - a.rowMax[n]);
    a.sumExp[n] = float(s);
    Index t = Index(a.targets[n]) - a.vocabStart;
    a.targetLogit[n] = t >= 0 && t < a.vocab ? a.logits[n * a.vocab + t] : 0.f;
  }
}

double crossEntropyLossRef(const CrossEntropyArgs &a) {
  double loss = 0;
  for (Index n = 0; n < a.rows; ++n)
    loss += std::log(double(a.sumExp[n])) + a.rowMax[n] - a.targetLogit[n];
  return loss / double(a.totalRows);
}

void crossEntropyBwdRef(const CrossEntropyArgs &a) {
  float scale = a.dloss / float(a.totalRows);
  for (Index n = 0; n < a.rows; ++n) {
    Index t = Index(a.targets[n]) - a.vocabStart;
    for (Index v = 0; v < a.vocab; ++v) {
      float p = float(std::exp(double(a.logits[n * a.vocab + v]) - a.rowMax[n]) / a.sumExp[n]);
      a.dlogits[n * a.vocab + v] = (p - (v == t ? 1.f : 0.f)) * scale;
    }
  }
}

} // namespace mist::kernels
