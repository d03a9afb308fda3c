//===- VectorMath.h - exp and tanh that compilers vectorize ---------------===//
/// \file
/// The C library's expf and tanhf are scalar calls, and the softmaxes,
/// GELU, SiLU and the cross-entropy evaluate one per element: with them the
/// transcendental functions cost as much as a layer's GEMMs. These are
/// branch-free arithmetic the compiler turns into SIMD code in the loops
/// that call them (Cody-Waite range reduction and a degree-6 polynomial, as
/// in Cephes' expf: within 2 ulp of expf over its range; tests compare every
/// fast kernel with its reference). No -ffast-math needed: the rounding
/// trick relies on IEEE addition as written.
///
/// MIST_CPU_KERNEL marks the hot loop functions: GCC compiles them for
/// AVX-512, AVX2+FMA and the baseline, and picks at load time for the CPU
/// at hand, so one trainer binary runs everywhere and fast where it can.
/// Each CPU always takes the same variant, so results repeat run to run.
/// Their element loops carry `#pragma omp simd`: outputs may be their
/// inputs (in-place ops), which defeats the compiler's overlap check though
/// every element only reads its own index.
//===----------------------------------------------------------------------===//
#pragma once

#include <bit>
#include <cstdint>

// Not under the sanitizers: their instrumented ifunc resolvers run before
// the sanitizer runtime starts (ThreadSanitizer crashes there).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define MIST_CPU_KERNEL                                                                            \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MIST_CPU_KERNEL
#endif

namespace mist::kernels::cpu {

/// e^x; 0 below -87.3 (where expf is denormal or 0), e^88.38 above 88.38 (the largest power of two
/// stays finite).
inline float fastExp(float x) {
  const float lo = -87.33654f, hi = 88.3762626647949f;
  bool underflow = x < lo;
  x = x > hi ? hi : (x < lo ? lo : x);
  // n = round(x / ln 2) with the 1.5 * 2^23 trick; r = x - n ln 2 in two parts.
  const float magic = 12582912.f;
  float n = (x * 1.44269504088896341f + magic) - magic;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits = (int32_t(n) + 127) << 23;
  float scale = std::bit_cast<float>(bits);
  return underflow ? 0.f : p * scale;
}

/// tanh(u) = 1 - 2 / (e^{2u} + 1): exact limits ±1, absolute error ~1e-7.
inline float fastTanh(float u) { return 1.f - 2.f / (fastExp(2.f * u) + 1.f); }

/// 1 / (1 + e^{-x}).
inline float fastSigmoid(float x) { return 1.f / (1.f + fastExp(-x)); }

/// erfc(z) for z >= 0 as t e^{-z^2 + h(t)}, t = 1 / (1 + z/2), with h a
/// degree-9 polynomial fitted to ln(erfc(z) / t) + z^2 on [0, 9.5] by
/// fit-erfc.py beside this file (4.3e-8 in double): in fp32 a relative
/// error below 1.5e-6 for z < 4, growing with the rounding of z^2 in the
/// far tail (4e-6 at z = 6, where erfc is 2e-17).
inline float fastErfcNonNegative(float z) {
  float t = 1.f / (1.f + 0.5f * z);
  float h = 0.138082883f;
  h = h * t - 0.64343295f;
  h = h * t + 1.06851634f;
  h = h * t - 0.578591297f;
  h = h * t - 0.177751289f;
  h = h * t + 0.0531024447f;
  h = h * t + 0.0169685017f;
  h = h * t + 0.390328488f;
  h = h * t + 0.998203826f;
  h = h * t - 1.26542691f;
  return t * fastExp(h - z * z);
}

/// The standard normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2, from the tail
/// that keeps its relative accuracy: Phi(x) itself for x < 0, 1 - Phi(-x)
/// (no cancellation, Phi >= 1/2) for x >= 0.
inline float fastNormalCdf(float x) {
  float tail = 0.5f * fastErfcNonNegative((x < 0.f ? -x : x) * 0.70710678118654752f);
  return x < 0.f ? tail : 1.f - tail;
}

} // namespace mist::kernels::cpu
