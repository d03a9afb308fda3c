//===- ElementwiseKernelsTest.cu - CUDA GELU, SiLU, mul, add vs reference -===//
#include "GpuTest.h"

#include "stdlib/kernels/activation/ActivationCuda.h"

using namespace mist::gputest;
using namespace mist::kernels;

namespace {

using Launch = cudaError_t (*)(const ElementwiseArgs &, cudaStream_t);
using Reference = void (*)(const ElementwiseArgs &);

/// Runs one op on random a, b, dout of n values on the GPU and the CPU and
/// compares every output it writes (out for forward; da, and db for mulBwd).
void check(const char *name, Launch cuda, Reference ref, size_t n, unsigned seed, bool backward,
           bool twoGrads, float rtol, float atol) {
  std::vector<float> a = randomVector(n, seed, 2.f), b = randomVector(n, seed + 1),
                     dout = randomVector(n, seed + 2);
  // Prefilled outputs: the kernels must overwrite every element.
  std::vector<float> out = randomVector(n, seed + 3), da = randomVector(n, seed + 4),
                     db = randomVector(n, seed + 5);
  DeviceBuffer<float> dA(a), dB(b), dDout(dout), dOut(out), dDa(da), dDb(db);
  ElementwiseArgs host{out.data(), a.data(), b.data(), da.data(), db.data(), dout.data(), Index(n)};
  ElementwiseArgs dev{dOut.ptr, dA.ptr, dB.ptr, dDa.ptr, dDb.ptr, dDout.ptr, Index(n)};
  ref(host);
  CHECK_CUDA(cuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::string what = std::string(name) + " n=" + std::to_string(n);
  if (!backward) {
    expectClose(what + " out", dOut.download(), out, rtol, atol);
    return;
  }
  expectClose(what + " da", dDa.download(), da, rtol, atol);
  if (twoGrads)
    expectClose(what + " db", dDb.download(), db, rtol, atol);
}

/// out == a, da == dout: the ops are allowed in place.
void checkInPlace(size_t n) {
  std::vector<float> a = randomVector(n, 91, 2.f), dout = randomVector(n, 92);
  std::vector<float> out(n), da(n);
  geluFwdRef({out.data(), a.data(), nullptr, nullptr, nullptr, nullptr, Index(n)});
  geluBwdRef({nullptr, a.data(), nullptr, da.data(), nullptr, dout.data(), Index(n)});
  DeviceBuffer<float> x(a), g(dout), xCopy(a);
  CHECK_CUDA(geluBwdCuda({nullptr, xCopy.ptr, nullptr, g.ptr, nullptr, g.ptr, Index(n)}, nullptr));
  CHECK_CUDA(geluFwdCuda({x.ptr, x.ptr, nullptr, nullptr, nullptr, nullptr, Index(n)}, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose("gelu fwd in place n=" + std::to_string(n), x.download(), out, 1e-4f, 1e-5f);
  expectClose("gelu bwd in place n=" + std::to_string(n), g.download(), da, 1e-4f, 1e-5f);
}

} // namespace

int main() {
  requireGpu();
  // 3M values: more than the 4096 x 256 threads of one grid, so the
  // grid-stride loop runs several rounds.
  const size_t sizes[] = {1, 31, 33, 1000, 4097, 3'000'007};
  unsigned seed = 1;
  for (size_t n : sizes) {
    // tanhf / erfcf / expf may differ from the host's by an ulp or two.
    check("geluFwd", geluFwdCuda, geluFwdRef, n, seed += 10, false, false, 1e-4f, 1e-5f);
    check("geluBwd", geluBwdCuda, geluBwdRef, n, seed += 10, true, false, 1e-4f, 1e-5f);
    check("geluExactFwd", geluExactFwdCuda, geluExactFwdRef, n, seed += 10, false, false, 1e-4f,
          1e-5f);
    check("geluExactBwd", geluExactBwdCuda, geluExactBwdRef, n, seed += 10, true, false, 1e-4f,
          1e-5f);
    check("siluFwd", siluFwdCuda, siluFwdRef, n, seed += 10, false, false, 1e-4f, 1e-5f);
    check("siluBwd", siluBwdCuda, siluBwdRef, n, seed += 10, true, false, 1e-4f, 1e-5f);
    // One IEEE product or sum per value: bitwise equal.
    check("mulFwd", mulFwdCuda, mulFwdRef, n, seed += 10, false, false, 0.f, 0.f);
    check("mulBwd", mulBwdCuda, mulBwdRef, n, seed += 10, true, true, 0.f, 0.f);
    check("addFwd", addFwdCuda, addFwdRef, n, seed += 10, false, false, 0.f, 0.f);
  }
  checkInPlace(4097);

  // n == 0 launches nothing; a negative n is refused.
  ElementwiseArgs empty{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0};
  if (geluFwdCuda(empty, nullptr) != cudaSuccess) {
    std::printf("FAIL n=0 is not a no-op\n");
    ++failures();
  }
  empty.n = -1;
  if (geluFwdCuda(empty, nullptr) != cudaErrorInvalidValue) {
    std::printf("FAIL n<0 is not refused\n");
    ++failures();
  }
  return finish();
}
