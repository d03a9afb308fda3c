//===- KernelMathTest.cpp - The CUDA kernels' formulas against the references
/// The per-element formulas the CUDA kernels call (ActivationMath.h,
/// AdamWMath.h, RopeMath.h, compiled here for the host) give what the CPU
/// references give: the GPU's arithmetic checked where there is no GPU.
/// Tolerances are an ulp or two (the same libm on both sides here), and for
/// AdamW's master a few roundings of the update: its bias corrections are
/// fp32 reciprocals where the reference divides in double.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/activation/Activation.h"
#include "stdlib/kernels/activation/ActivationMath.h"
#include "stdlib/kernels/adamw/AdamW.h"
#include "stdlib/kernels/adamw/AdamWMath.h"
#include "stdlib/kernels/rope/Rope.h"
#include "stdlib/kernels/rope/RopeMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace mist::kernels;

namespace {

/// Inputs across the ranges the ops see, their tails and zero.
std::vector<float> sweep() {
  std::vector<float> v;
  for (int i = -4000; i <= 4000; ++i)
    v.push_back(float(i) * 0.0025f); // [-10, 10]
  for (float x : {0.f, 1e-6f, -1e-6f, 1e-3f, -1e-3f, 20.f, -20.f, 40.f, -40.f})
    v.push_back(x);
  return v;
}

/// got within 2 units in the last place of want. On the host both sides run
/// the same libm, so a formula that differs from the reference (a constant,
/// a sign, an operand) shows; the device's own tanhf/erfcf/expf differ from
/// the host's by about an ulp, which the GPU tests (Bf16KernelsTest) allow.
void expectUlps(float got, float want, const char *what, float at) {
  const float ulp = std::nextafter(std::fabs(want), INFINITY) - std::fabs(want);
  EXPECT_NEAR(got, want, 2 * ulp) << what << " at " << at;
}

struct UnaryCase {
  const char *name;
  void (*fwdRef)(const ElementwiseArgs &);
  void (*bwdRef)(const ElementwiseArgs &);
  float (*fwd)(float);
  float (*bwd)(float, float);
};

} // namespace

TEST(KernelMath, ActivationsMatchTheReferences) {
  const std::vector<float> x = sweep();
  const Index n = Index(x.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-2.f, 2.f);
  std::vector<float> dy(x.size());
  for (float &d : dy)
    d = unit(rng);
  const UnaryCase cases[] = {
      {"gelu (tanh)", geluFwdRef, geluBwdRef, math::geluTanh, math::geluTanhGrad},
      {"gelu (exact)", geluExactFwdRef, geluExactBwdRef, math::geluExact, math::geluExactGrad},
      {"silu", siluFwdRef, siluBwdRef, math::silu, math::siluGrad},
  };
  for (const UnaryCase &c : cases) {
    std::vector<float> out(x.size()), dx(x.size());
    ElementwiseArgs args{out.data(), x.data(), nullptr, dx.data(), nullptr, dy.data(), n};
    c.fwdRef(args);
    c.bwdRef(args);
    for (size_t i = 0; i < x.size(); ++i) {
      expectUlps(c.fwd(x[i]), out[i], c.name, x[i]);
      expectUlps(c.bwd(x[i], dy[i]), dx[i], c.name, x[i]);
    }
  }
}

TEST(KernelMath, AdamWStepMatchesTheReference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  const Index n = 4096;
  for (int step : {1, 2, 10, 1000}) {
    for (float weightDecay : {0.f, 0.1f}) {
      std::vector<float> master(n), m(n), v(n), grad(n), param(n);
      for (Index i = 0; i < n; ++i) {
        master[i] = normal(rng) * 0.02f;
        m[i] = step > 1 ? normal(rng) * 1e-3f : 0.f;
        v[i] = step > 1 ? std::fabs(normal(rng)) * 1e-6f : 0.f;
        grad[i] = normal(rng) * 1e-2f;
      }
      std::vector<float> gm = m, gv = v, gmaster = master;
      AdamWArgs ref{master.data(), m.data(), v.data(), param.data(), grad.data(), n,   3e-4f,
                    0.9f,          0.95f,    1e-8f,    weightDecay,  0.5f,        step};
      adamWRef(ref);
      const math::AdamWHyper h =
          math::adamWHyper(ref.lr, ref.beta1, ref.beta2, ref.eps, weightDecay, 0.5f, step);
      for (Index i = 0; i < n; ++i) {
        float w = math::adamWStep(h, grad[i], gm[i], gv[i], gmaster[i]);
        EXPECT_EQ(w, gmaster[i]);
        EXPECT_EQ(gm[i], m[i]) << "first moment, step " << step << ", element " << i;
        EXPECT_EQ(gv[i], v[i]) << "second moment, step " << step << ", element " << i;
        // The update moves a master by about lr: its error is a few roundings of that.
        EXPECT_NEAR(gmaster[i], master[i], 1e-6f * std::fabs(master[i]) + 4e-10f)
            << "master, step " << step << ", element " << i;
      }
    }
  }
}

TEST(KernelMath, RopeAngleAndRotationMatchTheReference) {
  // Partial rotary (12 of 16 dims rotate), positions up to 4095, both ways.
  const Index batch = 1, seq = 4096, heads = 1, headDim = 16, rotary = 12;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<float> inp(size_t(batch * seq * heads * headDim)), out(inp.size());
  for (float &x : inp)
    x = unit(rng);
  for (bool inverse : {false, true}) {
    RopeArgs a{out.data(), inp.data(), batch, seq, heads, headDim, 10000.f, inverse, rotary};
    ropeRef(a);
    for (Index t = 0; t < seq; ++t)
      for (Index i = 0; i + 1 < rotary; i += 2) {
        // The kernel's sincos of the same double angle, rounded to fp32.
        const double angle = math::ropeAngle(t, i, rotary, a.theta);
        const float c = float(std::cos(angle)), s = float(std::sin(angle)) * (inverse ? -1.f : 1.f);
        const Index at = t * headDim + i;
        float y0, y1;
        math::ropeRotate(inp[at], inp[at + 1], c, s, y0, y1);
        EXPECT_EQ(y0, out[at]) << "t " << t << ", dim " << i;
        EXPECT_EQ(y1, out[at + 1]) << "t " << t << ", dim " << i + 1;
      }
  }
}
