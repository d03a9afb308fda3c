//===- CpuKernelsTest.cpp - The fast CPU kernels against the references ---===//
/// Every fast kernel (stdlib/kernels/<op>/<Op>Cpu.h) runs beside its
/// reference on the same random inputs, over shapes that reach the edges of
/// its blocking (sequences that are not a multiple of the attention block,
/// one row, odd widths, fused and grouped heads, a vocabulary slice), on one
/// thread and on three; outputs and accumulated gradients must agree within
/// fp32 rounding of the sums, and three-thread runs must repeat bit for bit.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/activation/ActivationCpu.h"
#include "stdlib/kernels/adamw/AdamWCpu.h"
#include "stdlib/kernels/attention/AttentionCpu.h"
#include "stdlib/kernels/cpu/Gemm.h"
#include "stdlib/kernels/cpu/Threads.h"
#include "stdlib/kernels/cpu/VectorMath.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCpu.h"
#include "stdlib/kernels/layernorm/LayerNormCpu.h"
#include "stdlib/kernels/linear/LinearCpu.h"
#include "stdlib/kernels/rmsnorm/RMSNormCpu.h"
#include "stdlib/kernels/rope/RopeCpu.h"
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

using namespace mist::kernels;
namespace cpu = mist::kernels::cpu;

namespace {

using Floats = std::vector<float>;

Floats random(size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  Floats v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

/// |fast - ref| <= tol * max(1, max |ref|) everywhere: a relative bound on
/// the tensor's scale, as fp32 sums in another order differ.
void expectClose(const char *what, const Floats &fast, const Floats &ref, double tol = 2e-5) {
  ASSERT_EQ(fast.size(), ref.size()) << what;
  double scale = 1;
  for (float r : ref)
    scale = std::max(scale, double(std::abs(r)));
  size_t worst = 0;
  double worstError = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    double e = std::abs(double(fast[i]) - ref[i]);
    if (!(e <= worstError)) { // also catches NaN
      worstError = e;
      worst = i;
    }
  }
  EXPECT_LE(worstError, tol * scale)
      << what << ": worst at " << worst << ": " << fast[worst] << " vs " << ref[worst];
}

/// Runs `body` on one thread, then twice on three: the three-thread runs
/// must be identical (the kernels' splits are static).
template <class Body> void onThreadCounts(Body body) {
  for (int threads : {1, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    cpu::setCpuThreads(threads);
    body(threads);
  }
  cpu::setCpuThreads(1);
}

TEST(CpuGemm, AllTransposesWithLeadingDimensionsMatchALoop) {
  const Index m = 37, n = 29, k = 70;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string(ta ? "T" : "N") + (tb ? "T" : "N"));
      // Stored with 3 extra columns each, so leading dimensions matter.
      Index lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 3;
      Floats a = random(size_t((ta ? k : m) * lda), 1), b = random(size_t((tb ? n : k) * ldb), 2);
      Floats c = random(size_t(m * ldc), 3), expected = c;
      for (Index i = 0; i < m; ++i)
        for (Index j = 0; j < n; ++j) {
          double acc = 0;
          for (Index p = 0; p < k; ++p)
            acc += double(ta ? a[p * lda + i] : a[i * lda + p]) *
                   (tb ? b[j * ldb + p] : b[p * ldb + j]);
          expected[i * ldc + j] = float(0.5 * acc + 2.0 * c[i * ldc + j]);
        }
      cpu::gemm(cpu::Trans(ta), cpu::Trans(tb), m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 2.f,
                c.data(), ldc);
      expectClose("C", c, expected, 1e-5);
    }
}

TEST(CpuGemm, BetaZeroOverwritesNaNsAndEmptyProductsScale) {
  Floats a = random(4 * 3, 4), b = random(3 * 5, 5);
  Floats c(4 * 5, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm(cpu::Trans::No, cpu::Trans::No, 4, 5, 3, 1.f, a.data(), 3, b.data(), 5, 0.f, c.data(),
            5);
  for (float x : c)
    EXPECT_TRUE(std::isfinite(x));
  Floats d(6, 2.f);
  cpu::gemm(cpu::Trans::No, cpu::Trans::No, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 0.5f, d.data(),
            3);
  for (float x : d)
    EXPECT_EQ(x, 1.f);
}

TEST(CpuVectorMath, ExpAndTanhAgreeWithTheCLibrary) {
  double worstExp = 0, worstTanh = 0;
  for (float x = -87.f; x < 88.f; x += 0.0137f) {
    double e = std::exp(double(x));
    worstExp = std::max(worstExp, std::abs(cpu::fastExp(x) - e) / e);
  }
  for (float u = -12.f; u < 12.f; u += 0.001f)
    worstTanh = std::max(worstTanh, std::abs(cpu::fastTanh(u) - std::tanh(double(u))));
  EXPECT_LT(worstExp, 2.5e-7); // about 2 ulp
  EXPECT_LT(worstTanh, 3e-7);
  EXPECT_EQ(cpu::fastExp(-100.f), 0.f);
  EXPECT_EQ(cpu::fastExp(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_TRUE(std::isfinite(cpu::fastExp(1000.f)));
  EXPECT_EQ(cpu::fastTanh(30.f), 1.f);
  EXPECT_EQ(cpu::fastTanh(-30.f), -1.f);
}

TEST(CpuKernels, LinearWithAndWithoutBias) {
  for (bool withBias : {true, false})
    for (Index rows : {Index(1), Index(67)}) {
      SCOPED_TRACE("bias " + std::to_string(withBias) + " rows " + std::to_string(rows));
      const Index in = 45, out = 38;
      Floats x = random(rows * in, 1), w = random(in * out, 2, 0.3f), b = random(out, 3),
             dy = random(rows * out, 4);
      Floats yRef(rows * out), dxRef(rows * in), dwRef = random(in * out, 5),
                                                 dbRef = random(out, 6);
      LinearArgs ref{yRef.data(),  x.data(),     w.data(),     withBias ? b.data() : nullptr,
                     dxRef.data(), dwRef.data(), dbRef.data(), dy.data(),
                     rows,         in,           out};
      linearFwdRef(ref);
      linearBwdRef(ref);
      onThreadCounts([&](int) {
        Floats y(rows * out), dx(rows * in), dw = random(in * out, 5), db = random(out, 6);
        LinearArgs fast{y.data(),  x.data(),  w.data(),  withBias ? b.data() : nullptr,
                        dx.data(), dw.data(), db.data(), dy.data(),
                        rows,      in,        out};
        linearFwdCpu(fast);
        linearBwdCpu(fast);
        expectClose("out", y, yRef);
        expectClose("dx", dx, dxRef);
        expectClose("dw (accumulated)", dw, dwRef);
        expectClose("db (accumulated)", db, dbRef);
      });
    }
}

TEST(CpuKernels, LmHead) {
  const Index rows = 19, channels = 24, vocab = 101;
  Floats x = random(rows * channels, 7), table = random(vocab * channels, 8, 0.5f),
         dlogits = random(rows * vocab, 9);
  Floats logitsRef(rows * vocab), dxRef(rows * channels), dtRef = random(vocab * channels, 10);
  lmHeadFwdRef(logitsRef.data(), x.data(), table.data(), rows, channels, vocab);
  lmHeadBwdRef(dxRef.data(), dtRef.data(), dlogits.data(), x.data(), table.data(), rows, channels,
               vocab);
  onThreadCounts([&](int) {
    Floats logits(rows * vocab), dx(rows * channels), dt = random(vocab * channels, 10);
    lmHeadFwdCpu(logits.data(), x.data(), table.data(), rows, channels, vocab);
    lmHeadBwdCpu(dx.data(), dt.data(), dlogits.data(), x.data(), table.data(), rows, channels,
                 vocab);
    expectClose("logits", logits, logitsRef);
    expectClose("dx", dx, dxRef);
    expectClose("dtable (accumulated)", dt, dtRef);
  });
}

struct AttentionCase {
  Index batch, seq, heads, kvHeads, headDim;
  bool fused, causal;
};

class CpuAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CpuAttention, MatchesTheReferenceAndRepeats) {
  const AttentionCase c = GetParam();
  const Index H = c.heads, KV = c.kvHeads, D = c.headDim, tokens = c.batch * c.seq;
  const Index qStride = c.fused ? (H + 2 * KV) * D : H * D, kvStride = c.fused ? qStride : KV * D;
  // Fused: q, k, v side by side per token in one buffer (and so their gradients).
  Floats qkv = random(size_t(tokens * (H + 2 * KV) * D), 11, 0.8f);
  Floats sq = random(size_t(tokens * H * D), 12, 0.8f),
         sk = random(size_t(tokens * KV * D), 13, 0.8f), sv = random(size_t(tokens * KV * D), 14);
  const float *q = c.fused ? qkv.data() : sq.data(), *k = c.fused ? qkv.data() + H * D : sk.data(),
              *v = c.fused ? qkv.data() + (H + KV) * D : sv.data();
  Floats dout = random(size_t(tokens * H * D), 15);
  struct Result {
    Floats out, lse, dq, dk, dv;
  };
  auto run = [&](bool fast) {
    Result r{Floats(tokens * H * D), Floats(tokens * H), {}, {}, {}};
    Floats grads(c.fused ? qkv.size() : 0), dq(c.fused ? 0 : sq.size()),
        dk(c.fused ? 0 : sk.size()), dv(c.fused ? 0 : sv.size());
    AttentionArgs a{r.out.data(),
                    r.lse.data(),
                    q,
                    k,
                    v,
                    c.fused ? grads.data() : dq.data(),
                    c.fused ? grads.data() + H * D : dk.data(),
                    c.fused ? grads.data() + (H + KV) * D : dv.data(),
                    dout.data(),
                    c.batch,
                    c.seq,
                    H,
                    KV,
                    D,
                    qStride,
                    kvStride,
                    c.causal};
    fast ? attentionFwdCpu(a) : attentionFwdRef(a);
    fast ? attentionBwdCpu(a) : attentionBwdRef(a);
    r.dq = c.fused ? grads : dq; // fused: the whole dqkv buffer, compared at once
    r.dk = dk;
    r.dv = dv;
    return r;
  };
  const Result ref = run(false);
  onThreadCounts([&](int threads) {
    Result fast = run(true);
    expectClose("out", fast.out, ref.out);
    expectClose("lse", fast.lse, ref.lse);
    expectClose("dq", fast.dq, ref.dq, 5e-5);
    expectClose("dk", fast.dk, ref.dk, 5e-5);
    expectClose("dv", fast.dv, ref.dv, 5e-5);
    if (threads > 1) {
      Result again = run(true);
      EXPECT_EQ(again.out, fast.out);
      EXPECT_EQ(again.dq, fast.dq);
      EXPECT_EQ(again.dk, fast.dk);
      EXPECT_EQ(again.dv, fast.dv);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuAttention,
    ::testing::Values(AttentionCase{2, 70, 4, 4, 16, true, true},  // fused, seq past one block
                      AttentionCase{1, 130, 4, 2, 8, false, true}, // grouped query heads
                      AttentionCase{3, 5, 3, 1, 4, false, true},   // multi-query, tiny
                      AttentionCase{2, 64, 2, 2, 32, true, false}, // not causal, one full block
                      AttentionCase{1, 1, 2, 1, 8, true, true}));  // one token

TEST(CpuKernels, LayerNormAndRMSNorm) {
  for (Index channels : {Index(7), Index(96)}) {
    SCOPED_TRACE("channels " + std::to_string(channels));
    const Index rows = 33;
    Floats x = random(rows * channels, 16, 2.f), w = random(channels, 17), b = random(channels, 18),
           dy = random(rows * channels, 19);
    auto layerNorm = [&](bool fast, bool withBias) {
      Floats out(rows * channels), mean(rows), rstd(rows), dx(rows * channels),
          dw = random(channels, 20), db = random(channels, 21);
      LayerNormArgs a{out.data(), mean.data(), rstd.data(),
                      x.data(),   w.data(),    withBias ? b.data() : nullptr,
                      dx.data(),  dw.data(),   withBias ? db.data() : nullptr,
                      dy.data(),  rows,        channels,
                      1e-5f};
      fast ? layerNormFwdCpu(a) : layerNormFwdRef(a);
      fast ? layerNormBwdCpu(a) : layerNormBwdRef(a);
      return std::vector<Floats>{out, mean, rstd, dx, dw, db};
    };
    auto rmsNorm = [&](bool fast) {
      Floats out(rows * channels), rstd(rows), dx(rows * channels), dw = random(channels, 22);
      RMSNormArgs a{out.data(), rstd.data(), x.data(), w.data(), dx.data(),
                    dw.data(),  dy.data(),   rows,     channels, 1e-6f};
      fast ? rmsNormFwdCpu(a) : rmsNormFwdRef(a);
      fast ? rmsNormBwdCpu(a) : rmsNormBwdRef(a);
      return std::vector<Floats>{out, rstd, dx, dw};
    };
    const char *lnNames[] = {"out", "mean", "rstd", "dx", "dweight", "dbias"};
    const char *rmsNames[] = {"out", "rstd", "dx", "dweight"};
    for (bool withBias : {true, false}) {
      auto ref = layerNorm(false, withBias);
      onThreadCounts([&](int) {
        auto fast = layerNorm(true, withBias);
        for (size_t i = 0; i < ref.size(); ++i)
          expectClose(lnNames[i], fast[i], ref[i]);
      });
    }
    auto ref = rmsNorm(false);
    onThreadCounts([&](int) {
      auto fast = rmsNorm(true);
      for (size_t i = 0; i < ref.size(); ++i)
        expectClose(rmsNames[i], fast[i], ref[i]);
    });
  }
}

TEST(CpuKernels, Elementwise) {
  const Index n = 100003; // past the split's grain, not a multiple of any vector width
  Floats a = random(n, 23, 3.f), b = random(n, 24), dy = random(n, 25);
  using Kernel = void (*)(const ElementwiseArgs &);
  struct Pair {
    const char *name;
    Kernel ref, fast;
    bool backward;
  };
  const Pair pairs[] = {{"gelu", geluFwdRef, geluFwdCpu, false},
                        {"gelu'", geluBwdRef, geluBwdCpu, true},
                        {"exact gelu", geluExactFwdRef, geluExactFwdCpu, false},
                        {"exact gelu'", geluExactBwdRef, geluExactBwdCpu, true},
                        {"silu", siluFwdRef, siluFwdCpu, false},
                        {"silu'", siluBwdRef, siluBwdCpu, true},
                        {"mul", mulFwdRef, mulFwdCpu, false},
                        {"mul'", mulBwdRef, mulBwdCpu, true},
                        {"add", addFwdRef, addFwdCpu, false}};
  for (const Pair &p : pairs) {
    SCOPED_TRACE(p.name);
    auto run = [&](Kernel kernel) {
      Floats out(n), da(n), db(n);
      kernel({out.data(), a.data(), b.data(), da.data(), db.data(), dy.data(), n});
      return p.backward ? std::vector<Floats>{da, db} : std::vector<Floats>{out};
    };
    auto ref = run(p.ref);
    onThreadCounts([&](int) {
      auto fast = run(p.fast);
      for (size_t i = 0; i < ref.size(); ++i)
        expectClose("result", fast[i], ref[i], 5e-6);
    });
  }
}

// Both GELU forms at points where they differ, against their closed forms
// evaluated in double (x Phi(x) through erfc; the tanh formula of GPT-2),
// so the two cannot be swapped or share one formula unnoticed.
TEST(CpuKernels, GeluFormsAtKnownPoints) {
  struct Point {
    float x;
    double exact, tanh;
  };
  const Point points[] = {{-6.f, -5.919525870226207e-09, -8.43964897967453e-11},
                          {-3.f, -0.004049694094890287, -0.0036373920817729943},
                          {-1.f, -0.15865525393145707, -0.15880800939172324},
                          {-0.25f, -0.10032341857926907, -0.100324649298315},
                          {0.5f, 0.34573123063700656, 0.34571400982514394},
                          {1.f, 0.8413447460685429, 0.8411919906082768},
                          {2.5f, 2.4844758366855597, 2.484915733910001}};
  using Kernel = void (*)(const ElementwiseArgs &);
  // The tanh reference's 0.5 x (1 + tanh u) cancels for negative x (an
  // absolute error up to ~1e-7); the other three keep their relative accuracy.
  for (auto [kernel, exact, floor, name] :
       {std::tuple<Kernel, bool, double, const char *>{geluExactFwdRef, true, 1e-9, "exact ref"},
        {geluExactFwdCpu, true, 1e-9, "exact fast"},
        {geluFwdRef, false, 2e-7, "tanh ref"},
        {geluFwdCpu, false, 1e-9, "tanh fast"}})
    for (const Point &p : points) {
      float x = p.x, y = 0.f;
      kernel({&y, &x, nullptr, nullptr, nullptr, nullptr, 1});
      double want = exact ? p.exact : p.tanh;
      EXPECT_NEAR(y, want, std::max(3e-6 * std::abs(want), floor)) << name << " at " << x;
    }
}

TEST(CpuKernels, CrossEntropyPhasesOverAVocabularySlice) {
  const Index rows = 21, vocab = 203, vocabStart = 50;
  Floats logits = random(rows * vocab, 26, 3.f);
  std::vector<int32_t> targets(rows);
  for (Index n = 0; n < rows; ++n)
    targets[size_t(n)] = int32_t((n * 37) % 300); // some outside this rank's slice
  auto run = [&](bool fast) {
    Floats mx(rows), se(rows), tl(rows), dl(rows * vocab);
    CrossEntropyArgs a{logits.data(), targets.data(), mx.data(),  se.data(), tl.data(), dl.data(),
                       rows,          vocab,          vocabStart, 2 * rows,  0.7f};
    fast ? crossEntropyMaxCpu(a) : crossEntropyMaxRef(a);
    fast ? crossEntropySumCpu(a) : crossEntropySumRef(a);
    fast ? crossEntropyBwdCpu(a) : crossEntropyBwdRef(a);
    return std::vector<Floats>{mx, se, tl, dl};
  };
  auto ref = run(false);
  const char *names[] = {"rowMax", "sumExp", "targetLogit", "dlogits"};
  onThreadCounts([&](int) {
    auto fast = run(true);
    for (size_t i = 0; i < ref.size(); ++i)
      expectClose(names[i], fast[i], ref[i]);
  });
}

TEST(CpuKernels, AdamW) {
  const Index n = 70001;
  Floats grad = random(n, 27, 0.1f);
  auto run = [&](bool fast) {
    Floats master = random(n, 28), m = random(n, 29, 0.01f), v = random(n, 30, 0.001f), param(n);
    for (float &x : v)
      x = std::abs(x);
    AdamWArgs a{master.data(), m.data(), v.data(), param.data(), grad.data(), n, 3e-3f,
                0.9f,          0.95f,    1e-8f,    0.1f,         0.5f,        7};
    fast ? adamWCpu(a) : adamWRef(a);
    return std::vector<Floats>{master, m, v, param};
  };
  auto ref = run(false);
  const char *names[] = {"master", "m", "v", "param"};
  onThreadCounts([&](int) {
    auto fast = run(true);
    for (size_t i = 0; i < ref.size(); ++i)
      expectClose(names[i], fast[i], ref[i], 1e-6);
  });
}

TEST(CpuKernels, RopeIsTheReferenceBitForBit) {
  const Index batch = 2, seq = 9, heads = 3, headDim = 12;
  Floats x = random(batch * seq * heads * headDim, 31);
  for (Index rotary : {Index(0), Index(8)})
    for (bool inverse : {false, true}) {
      Floats ref(x.size()), fast(x.size());
      ropeRef({ref.data(), x.data(), batch, seq, heads, headDim, 10000.f, inverse, rotary});
      onThreadCounts([&](int) {
        ropeCpu({fast.data(), x.data(), batch, seq, heads, headDim, 10000.f, inverse, rotary});
        EXPECT_EQ(fast, ref) << "rotary " << rotary << " inverse " << inverse;
      });
    }
}

} // namespace
