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

} // namespace mist::kernels::cpu
