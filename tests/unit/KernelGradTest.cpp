//===- KernelGradTest.cpp - CPU kernels against finite differences --------===//
/// Each backward is checked against central differences of the forward on
/// small random inputs: with L = sum(out * R) for a fixed random R, dL/dout
/// is R and every input gradient must match (L(x+e) - L(x-e)) / 2e.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/activation/Activation.h"
#include "stdlib/kernels/adamw/AdamW.h"
#include "stdlib/kernels/attention/Attention.h"
#include "stdlib/kernels/crossentropy/CrossEntropy.h"
#include "stdlib/kernels/embedding/Embedding.h"
#include "stdlib/kernels/layernorm/LayerNorm.h"
#include "stdlib/kernels/linear/Linear.h"
#include "stdlib/kernels/rmsnorm/RMSNorm.h"
#include "stdlib/kernels/rope/Rope.h"
#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <random>

using namespace mist::kernels;

namespace {

std::vector<float> random(size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += double(a[i]) * b[i];
  return s;
}

/// Compares `analytic` with central differences of `loss` w.r.t. `x`.
void expectGradient(const char *what, std::vector<float> &x, const std::vector<float> &analytic,
                    const std::function<double()> &loss, float eps = 1e-2f, double tol = 3e-3) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  size_t step = std::max<size_t>(1, x.size() / 48); // a sample of the entries
  for (size_t i = 0; i < x.size(); i += step) {
    float keep = x[i];
    x[i] = keep + eps;
    double up = loss();
    x[i] = keep - eps;
    double down = loss();
    x[i] = keep;
    double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, tol * (1 + std::abs(numeric))) << what << "[" << i << "]";
  }
}

TEST(KernelGrad, Linear) {
  const Index N = 6, In = 5, Out = 7;
  auto x = random(N * In, 1), w = random(In * Out, 2), b = random(Out, 3), r = random(N * Out, 4);
  std::vector<float> y(N * Out), dx(N * In), dw(In * Out, 0), db(Out, 0);
  LinearArgs a{y.data(),  x.data(), w.data(), b.data(), dx.data(), dw.data(),
               db.data(), r.data(), N,        In,       Out};
  auto loss = [&] {
    linearFwdRef(a);
    return dot(y, r);
  };
  linearBwdRef(a);
  expectGradient("dx", x, dx, loss);
  expectGradient("dw", w, dw, loss);
  expectGradient("db", b, db, loss);
}

TEST(KernelGrad, LayerNorm) {
  const Index N = 5, C = 8;
  auto x = random(N * C, 5), w = random(C, 6), b = random(C, 7), r = random(N * C, 8);
  std::vector<float> y(N * C), mean(N), rstd(N), dx(N * C), dw(C, 0), db(C, 0);
  LayerNormArgs a{y.data(),  mean.data(), rstd.data(), x.data(), w.data(), b.data(), dx.data(),
                  dw.data(), db.data(),   r.data(),    N,        C,        1e-5f};
  auto loss = [&] {
    layerNormFwdRef(a);
    return dot(y, r);
  };
  loss();
  layerNormBwdRef(a);
  expectGradient("dx", x, dx, loss);
  expectGradient("dw", w, dw, loss);
  expectGradient("db", b, db, loss);
}

TEST(KernelGrad, RMSNorm) {
  const Index N = 5, C = 8;
  auto x = random(N * C, 9), w = random(C, 10), r = random(N * C, 11);
  std::vector<float> y(N * C), rstd(N), dx(N * C), dw(C, 0);
  RMSNormArgs a{y.data(),  rstd.data(), x.data(), w.data(), dx.data(),
                dw.data(), r.data(),    N,        C,        1e-6f};
  auto loss = [&] {
    rmsNormFwdRef(a);
    return dot(y, r);
  };
  loss();
  rmsNormBwdRef(a);
  expectGradient("dx", x, dx, loss);
  expectGradient("dw", w, dw, loss);
}

void checkAttention(Index H, Index KV, bool fused) {
  const Index B = 2, T = 5, D = 4;
  // Fused: q, k, v side by side per token; separate: their own tensors.
  Index qStride = fused ? (H + 2 * KV) * D : H * D, kvStride = fused ? qStride : KV * D;
  std::vector<float> qkv = random(B * T * (H + 2 * KV) * D, 12, 0.7f);
  std::vector<float> q, k, v;
  if (!fused) {
    q = random(B * T * H * D, 13, 0.7f);
    k = random(B * T * KV * D, 14, 0.7f);
    v = random(B * T * KV * D, 15, 0.7f);
  }
  float *qp = fused ? qkv.data() : q.data();
  float *kp = fused ? qkv.data() + H * D : k.data();
  float *vp = fused ? qkv.data() + (H + KV) * D : v.data();
  auto r = random(B * T * H * D, 16);
  std::vector<float> out(B * T * H * D), lse(B * H * T);
  std::vector<float> dqkv(qkv.size()), dq(q.size()), dk(k.size()), dv(v.size());
  AttentionArgs a{out.data(),
                  lse.data(),
                  qp,
                  kp,
                  vp,
                  fused ? dqkv.data() : dq.data(),
                  fused ? dqkv.data() + H * D : dk.data(),
                  fused ? dqkv.data() + (H + KV) * D : dv.data(),
                  r.data(),
                  B,
                  T,
                  H,
                  KV,
                  D,
                  qStride,
                  kvStride,
                  true};
  auto loss = [&] {
    attentionFwdRef(a);
    return dot(out, r);
  };
  loss();
  attentionBwdRef(a);
  if (fused) {
    expectGradient("dqkv", qkv, dqkv, loss);
  } else {
    expectGradient("dq", q, dq, loss);
    expectGradient("dk", k, dk, loss);
    expectGradient("dv", v, dv, loss);
  }
}

TEST(KernelGrad, AttentionMultiHead) { checkAttention(4, 4, true); }
TEST(KernelGrad, AttentionGroupedQuery) { checkAttention(4, 2, false); }
TEST(KernelGrad, AttentionMultiQuery) { checkAttention(3, 1, false); }

TEST(KernelGrad, AttentionIsCausal) {
  // The first token's output is exactly its own value vector.
  const Index T = 4, D = 2;
  auto q = random(T * D, 17), k = random(T * D, 18), v = random(T * D, 19);
  std::vector<float> out(T * D), lse(T);
  AttentionArgs a{out.data(), lse.data(), q.data(), k.data(), v.data(), nullptr,
                  nullptr,    nullptr,    nullptr,  1,        T,        1,
                  1,          D,          D,        D,        true};
  attentionFwdRef(a);
  EXPECT_FLOAT_EQ(out[0], v[0]);
  EXPECT_FLOAT_EQ(out[1], v[1]);
}

TEST(KernelGrad, Rope) {
  const Index B = 1, T = 4, H = 2, D = 6;
  auto x = random(B * T * H * D, 20), r = random(B * T * H * D, 21);
  std::vector<float> y(x.size()), dx(x.size());
  auto loss = [&] {
    ropeRef({y.data(), x.data(), B, T, H, D, 10000.f, false});
    return dot(y, r);
  };
  ropeRef({dx.data(), r.data(), B, T, H, D, 10000.f, true});
  expectGradient("dx", x, dx, loss);
  // Position 0 is not rotated.
  loss();
  EXPECT_FLOAT_EQ(y[0], x[0]);
}

// Partial rotary (GPT-NeoX): the first R dims of a head rotate, with the
// angles of an R-dim head; the rest pass through unchanged.
TEST(KernelGrad, RopePartial) {
  const Index B = 1, T = 5, H = 2, D = 8, R = 4;
  auto x = random(B * T * H * D, 30), r = random(B * T * H * D, 31);
  std::vector<float> y(x.size()), dx(x.size()), full(x.size());
  auto loss = [&] {
    ropeRef({y.data(), x.data(), B, T, H, D, 10000.f, false, R});
    return dot(y, r);
  };
  ropeRef({dx.data(), r.data(), B, T, H, D, 10000.f, true, R});
  expectGradient("dx", x, dx, loss);
  loss();
  // A head of R dims rotated alone gives the same leading dims.
  std::vector<float> head(static_cast<size_t>(R));
  for (Index t = 0; t < T; ++t)
    for (Index h = 0; h < H; ++h) {
      const Index base = (t * H + h) * D;
      for (Index d = 0; d < R; ++d)
        head[size_t(d)] = x[size_t(base + d)];
      // Position t of a one-token sequence: rotate at t by running t + 1 tokens.
      std::vector<float> seqIn(size_t((t + 1) * R)), seqOut(seqIn.size());
      std::copy(head.begin(), head.end(), seqIn.begin() + t * R);
      ropeRef({seqOut.data(), seqIn.data(), 1, t + 1, 1, R, 10000.f, false});
      for (Index d = 0; d < R; ++d)
        EXPECT_FLOAT_EQ(y[size_t(base + d)], seqOut[size_t(t * R + d)]) << "t " << t << " d " << d;
      for (Index d = R; d < D; ++d)
        EXPECT_EQ(y[size_t(base + d)], x[size_t(base + d)]) << "pass-through t " << t << " d " << d;
    }
}

TEST(KernelGrad, Elementwise) {
  const Index n = 40;
  auto x = random(n, 22), z = random(n, 23), r = random(n, 24);
  std::vector<float> y(n), dx(n), dz(n);
  ElementwiseArgs a{y.data(), x.data(), z.data(), dx.data(), dz.data(), r.data(), n};
  for (auto [fwdRef, bwd, name] : {std::tuple{&geluFwdRef, &geluBwdRef, "gelu"},
                                   std::tuple{&geluExactFwdRef, &geluExactBwdRef, "exact gelu"},
                                   std::tuple{&siluFwdRef, &siluBwdRef, "silu"}}) {
    auto fwd = fwdRef; // a copy: C++17 lambdas cannot capture structured bindings
    auto loss = [&] {
      fwd(a);
      return dot(y, r);
    };
    bwd(a);
    expectGradient(name, x, dx, loss);
  }
  auto mulLoss = [&] {
    mulFwdRef(a);
    return dot(y, r);
  };
  mulBwdRef(a);
  expectGradient("mul da", x, dx, mulLoss);
  expectGradient("mul db", z, dz, mulLoss);
}

TEST(KernelGrad, EmbeddingsOverAVocabularySlice) {
  const Index N = 6, C = 3, V = 5;
  std::vector<int32_t> ids = {0, 7, 5, 9, 5, 2}; // this rank owns rows 5..9
  auto table = random(V * C, 25), r = random(N * C, 26);
  std::vector<float> out(N * C), dtable(V * C, 0);
  EmbeddingArgs a{out.data(), ids.data(), table.data(), dtable.data(), r.data(), N, C, V, 5};
  auto loss = [&] {
    embeddingFwdRef(a);
    return dot(out, r);
  };
  loss();
  EXPECT_EQ(out[0], 0.f); // id 0 belongs to another rank
  embeddingBwdRef(a);
  expectGradient("dtable", table, dtable, loss);

  const Index B = 2, T = 3;
  auto pos = random(T * C, 27), rp = random(B * T * C, 28);
  std::vector<float> pout(B * T * C), dpos(T * C, 0);
  PositionEmbeddingArgs p{pout.data(), pos.data(), dpos.data(), rp.data(), B * T, T, C, 0};
  auto ploss = [&] {
    positionEmbeddingFwdRef(p);
    return dot(pout, rp);
  };
  positionEmbeddingBwdRef(p);
  expectGradient("dpos", pos, dpos, ploss);

  // A tp rank's part of the flattened tokens under sequence parallelism
  // (rows 2-4 of 6: positions 2, 0, 1) reads and adds the same rows.
  std::vector<float> part(3 * C), dpart(T * C, 0);
  PositionEmbeddingArgs q{part.data(), pos.data(), dpart.data(), rp.data() + 2 * C, 3, T, C, 2};
  positionEmbeddingFwdRef(p); // the finite differences left it perturbed
  positionEmbeddingFwdRef(q);
  for (Index i = 0; i < 3 * C; ++i)
    EXPECT_EQ(part[size_t(i)], pout[size_t(2 * C + i)]);
  positionEmbeddingBwdRef(q);
  for (Index c = 0; c < C; ++c) // position 0 gets row 3 only, position 2 row 2
    EXPECT_EQ(dpart[size_t(c)], rp[size_t(3 * C + c)]);
  for (Index c = 0; c < C; ++c)
    EXPECT_EQ(dpart[size_t(2 * C + c)], rp[size_t(2 * C + c)]);
}

TEST(KernelGrad, VocabParallelCrossEntropyMatchesTheWholeVocabulary) {
  const Index N = 4, V = 10;
  auto logits = random(N * V, 29, 2.f);
  std::vector<int32_t> targets = {3, 9, 0, 6};
  // Whole vocabulary on one rank.
  std::vector<float> mx(N), se(N), tl(N), dl(N * V);
  CrossEntropyArgs whole{
      logits.data(), targets.data(), mx.data(), se.data(), tl.data(), dl.data(), N, V, 0, N, 1.f};
  auto loss = [&] {
    crossEntropyMaxRef(whole);
    crossEntropySumRef(whole);
    return crossEntropyLossRef(whole);
  };
  double full = loss();
  crossEntropyBwdRef(whole);
  expectGradient("dlogits", logits, dl, loss);
  // The same vocabulary split over two ranks with the reductions done by hand.
  std::vector<float> left(N * 6), right(N * 4);
  for (Index n = 0; n < N; ++n)
    for (Index v = 0; v < V; ++v)
      (v < 6 ? left[n * 6 + v] : right[n * 4 + v - 6]) = logits[n * V + v];
  std::vector<float> m0(N), m1(N), s0(N), s1(N), t0(N), t1(N), d0(N * 6), d1(N * 4);
  CrossEntropyArgs r0{
      left.data(), targets.data(), m0.data(), s0.data(), t0.data(), d0.data(), N, 6, 0, N, 1.f};
  CrossEntropyArgs r1{
      right.data(), targets.data(), m1.data(), s1.data(), t1.data(), d1.data(), N, 4, 6, N, 1.f};
  crossEntropyMaxRef(r0);
  crossEntropyMaxRef(r1);
  for (Index n = 0; n < N; ++n)
    m0[n] = m1[n] = std::max(m0[n], m1[n]); // all-reduce max
  crossEntropySumRef(r0);
  crossEntropySumRef(r1);
  for (Index n = 0; n < N; ++n) {
    s0[n] = s1[n] = s0[n] + s1[n]; // all-reduce sum
    t0[n] = t1[n] = t0[n] + t1[n];
  }
  EXPECT_NEAR(crossEntropyLossRef(r0), full, 1e-6);
  crossEntropyBwdRef(r0);
  crossEntropyBwdRef(r1);
  for (Index n = 0; n < N; ++n)
    for (Index v = 0; v < V; ++v)
      EXPECT_NEAR(v < 6 ? d0[n * 6 + v] : d1[n * 4 + v - 6], dl[n * V + v], 1e-7);
}

TEST(Kernel, AdamWStep) {
  std::vector<float> master = {1.f, -2.f}, m = {0.f, 0.1f}, v = {0.f, 0.01f}, param(2),
                     grad = {0.5f, -1.f};
  AdamWArgs a{master.data(), m.data(), v.data(), param.data(), grad.data(), 2, 0.1f,
              0.9f,          0.999f,   1e-8f,    0.01f,        1.f,         2};
  adamWRef(a);
  // Hand computation for the first entry.
  double m1 = 0.1 * 0.5, v1 = 0.001 * 0.25;
  double mhat = m1 / (1 - 0.81), vhat = v1 / (1 - 0.999 * 0.999);
  double expected = 1 - 0.1 * (mhat / (std::sqrt(vhat) + 1e-8) + 0.01 * 1);
  EXPECT_NEAR(master[0], expected, 1e-6);
  EXPECT_EQ(param[0], master[0]);
  EXPECT_NEAR(m[1], 0.9 * 0.1 + 0.1 * -1.0, 1e-7);
}

} // namespace
