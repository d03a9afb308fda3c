//===- AttentionRef.cpp - CPU reference of causal attention ---------------===//
#include "stdlib/kernels/attention/Attention.h"

#include <cmath>
#include <vector>

namespace mist::kernels {

namespace {

struct View {
  const AttentionArgs &a;
  Index qAt(Index b, Index t, Index h) const { return (b * a.seq + t) * a.qStride + h * a.headDim; }
  Index kvAt(Index b, Index t, Index g) const {
    return (b * a.seq + t) * a.kvStride + g * a.headDim;
  }
  Index outAt(Index b, Index t, Index h) const {
    return ((b * a.seq + t) * a.heads + h) * a.headDim;
  }
  Index group(Index h) const { return h / (a.heads / a.kvHeads); }
  Index keys(Index t) const { return a.causal ? t + 1 : a.seq; }
  float score(Index b, Index h, Index t, Index s) const {
    float acc = 0;
    const float *qv = a.q + qAt(b, t, h), *kv = a.k + kvAt(b, s, group(h));
    for (Index d = 0; d < a.headDim; ++d)
      acc += qv[d] * kv[d];
    return acc / std::sqrt(float(a.headDim));
  }
};

} // namespace

void attentionFwdRef(const AttentionArgs &a) {
  View w{a};
  std::vector<float> p(a.seq);
  for (Index b = 0; b < a.batch; ++b)
    for (Index h = 0; h < a.heads; ++h)
      for (Index t = 0; t < a.seq; ++t) {
        float mx = -INFINITY;
        for (Index s = 0; s < w.keys(t); ++s)
          mx = std::max(mx, p[s] = w.score(b, h, t, s));
        double sum = 0;
        for (Index s = 0; s < w.keys(t); ++s)
          sum += p[s] = std::exp(p[s] - mx);
        a.lse[(b * a.heads + h) * a.seq + t] = mx + float(std::log(sum));
        float *o = a.out + w.outAt(b, t, h);
        for (Index d = 0; d < a.headDim; ++d) {
          double acc = 0;
          for (Index s = 0; s < w.keys(t); ++s)
            acc += p[s] * a.v[w.kvAt(b, s, w.group(h)) + d];
          o[d] = float(acc / sum);
        }
      }
}

void attentionBwdRef(const AttentionArgs &a) {
  View w{a};
  for (Index b = 0; b < a.batch; ++b)
    for (Index t = 0; t < a.seq; ++t) {
      for (Index h = 0; h < a.heads; ++h)
        for (Index d = 0; d < a.headDim; ++d)
          a.dq[w.qAt(b, t, h) + d] = 0;
      for (Index g = 0; g < a.kvHeads; ++g)
        for (Index d = 0; d < a.headDim; ++d)
          a.dk[w.kvAt(b, t, g) + d] = a.dv[w.kvAt(b, t, g) + d] = 0;
    }
  float scale = 1 / std::sqrt(float(a.headDim));
  std::vector<float> p(a.seq), dp(a.seq);
  for (Index b = 0; b < a.batch; ++b)
    for (Index h = 0; h < a.heads; ++h)
      for (Index t = 0; t < a.seq; ++t) {
        const float *dy = a.dout + w.outAt(b, t, h), *y = a.out + w.outAt(b, t, h);
        float lse = a.lse[(b * a.heads + h) * a.seq + t];
        // D = sum_d dy * y equals sum_s p_s * dp_s.
        float D = 0;
        for (Index d = 0; d < a.headDim; ++d)
          D += dy[d] * y[d];
        Index g = w.group(h);
        for (Index s = 0; s < w.keys(t); ++s) {
          p[s] = std::exp(w.score(b, h, t, s) - lse);
          float acc = 0;
          for (Index d = 0; d < a.headDim; ++d) {
            acc += dy[d] * a.v[w.kvAt(b, s, g) + d];
            a.dv[w.kvAt(b, s, g) + d] += p[s] * dy[d];
          }
          dp[s] = acc;
        }
        for (Index s = 0; s < w.keys(t); ++s) {
          float ds = p[s] * (dp[s] - D) * scale;
          for (Index d = 0; d < a.headDim; ++d) {
            a.dq[w.qAt(b, t, h) + d] += ds * a.k[w.kvAt(b, s, g) + d];
            a.dk[w.kvAt(b, s, g) + d] += ds * a.q[w.qAt(b, t, h) + d];
          }
        }
      }
}

} // namespace mist::kernels
