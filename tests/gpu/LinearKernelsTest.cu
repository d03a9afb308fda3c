//===- LinearKernelsTest.cu - cuBLASLt linear layer vs the CPU reference --===//
/// Forward and backward in exact fp32 (tight tolerances) and tf32, odd shapes,
/// with and without bias and dinp, dweight and dbias prefilled with nonzero
/// values to check that they accumulate; the bf16 forward against the
/// reference run on the bf16-rounded inputs.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/linear/LinearCuda.h"
#include "tests/gpu/GpuTest.h"

#include <cuda_bf16.h>

using namespace mist::kernels;
using namespace mist::gputest;

namespace {

struct Shape {
  Index rows, in, out;
};

std::string name(const char *what, const Shape &s, bool bias) {
  return std::string(what) + " " + std::to_string(s.rows) + "x" + std::to_string(s.in) + "x" +
         std::to_string(s.out) + (bias ? " bias" : "");
}

/// Sums of k products of N(0,1) values: absolute error grows like sqrt(k).
float sumTolerance(float perTerm, Index k) {
  return perTerm * std::sqrt(float(std::max<Index>(k, 1)));
}

void checkLinear(const Shape &s, bool bias, bool withDinp, LinearContext &ctx, float rtol,
                 float termTol, const char *label) {
  unsigned seed = unsigned(s.rows * 131 + s.in * 17 + s.out + (bias ? 7 : 0));
  auto x = randomVector(size_t(s.rows * s.in), seed);
  auto w = randomVector(size_t(s.in * s.out), seed + 1);
  auto b = randomVector(size_t(s.out), seed + 2);
  auto dy = randomVector(size_t(s.rows * s.out), seed + 3);
  auto dw0 = randomVector(size_t(s.in * s.out), seed + 4); // nonzero: += must keep them
  auto db0 = randomVector(size_t(s.out), seed + 5);

  std::vector<float> y(size_t(s.rows * s.out)), dx(size_t(s.rows * s.in)), dw = dw0, db = db0;
  LinearArgs ref{y.data(),
                 x.data(),
                 w.data(),
                 bias ? b.data() : nullptr,
                 withDinp ? dx.data() : nullptr,
                 dw.data(),
                 bias ? db.data() : nullptr,
                 dy.data(),
                 s.rows,
                 s.in,
                 s.out};
  linearFwdRef(ref);
  linearBwdRef(ref);

  DeviceBuffer<float> dX(x), dW(w), dB(b), dY(dy), dOut(y.size()), dDx(dx.size()), dDw(dw0),
      dDb(db0);
  LinearArgs args{dOut.ptr,
                  dX.ptr,
                  dW.ptr,
                  bias ? dB.ptr : nullptr,
                  withDinp ? dDx.ptr : nullptr,
                  dDw.ptr,
                  bias ? dDb.ptr : nullptr,
                  dY.ptr,
                  s.rows,
                  s.in,
                  s.out};
  cublasStatus_t rc = linearFwdCuda(args, nullptr, &ctx);
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = linearBwdCuda(args, nullptr, &ctx);
  CHECK_CUDA(cudaDeviceSynchronize());
  if (rc != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL %s: %s\n", name(label, s, bias).c_str(), cublasLtGetStatusString(rc));
    ++failures();
    return;
  }
  std::string tag = name(label, s, bias);
  expectClose(tag + " out", dOut.download(), y, rtol, sumTolerance(termTol, s.in));
  if (withDinp)
    expectClose(tag + " dinp", dDx.download(), dx, rtol, sumTolerance(termTol, s.out));
  expectClose(tag + " dweight", dDw.download(), dw, rtol, sumTolerance(termTol, s.rows));
  if (bias)
    expectClose(tag + " dbias", dDb.download(), db, rtol, sumTolerance(termTol, s.rows));
}

std::vector<float> roundToBf16(const std::vector<float> &v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    r[i] = __bfloat162float(__float2bfloat16(v[i]));
  return r;
}

std::vector<__nv_bfloat16> toBf16(const std::vector<float> &v) {
  std::vector<__nv_bfloat16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    r[i] = __float2bfloat16(v[i]);
  return r;
}

std::vector<float> fromBf16(const std::vector<__nv_bfloat16> &v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    r[i] = __bfloat162float(v[i]);
  return r;
}

void checkBf16(const Shape &s, bool bias) {
  unsigned seed = unsigned(s.rows * 7 + s.in * 3 + s.out + 1000);
  // The reference runs on the values the GPU sees: inputs (and the bf16
  // bias) rounded to bf16. Their products are exact in fp32.
  auto x = roundToBf16(randomVector(size_t(s.rows * s.in), seed));
  auto w = roundToBf16(randomVector(size_t(s.in * s.out), seed + 1));
  auto b = roundToBf16(randomVector(size_t(s.out), seed + 2));
  std::vector<float> y(size_t(s.rows * s.out));
  linearFwdRef({y.data(), x.data(), w.data(), bias ? b.data() : nullptr, nullptr, nullptr, nullptr,
                nullptr, s.rows, s.in, s.out});

  DeviceBuffer<__nv_bfloat16> dX(toBf16(x)), dW(toBf16(w)), dBh(toBf16(b)), dOutH(y.size());
  DeviceBuffer<float> dB(b), dOut(y.size());
  std::string tag = name("bf16", s, bias);
  cublasStatus_t rc = linearFwdBf16Cuda(dOut.ptr, dX.ptr, dW.ptr, bias ? dB.ptr : nullptr, s.rows,
                                        s.in, s.out, nullptr);
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = linearFwdBf16Cuda(dOutH.ptr, dX.ptr, dW.ptr, bias ? dBh.ptr : nullptr, s.rows, s.in, s.out,
                           nullptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  if (rc != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL %s: %s\n", tag.c_str(), cublasLtGetStatusString(rc));
    ++failures();
    return;
  }
  // fp32 output: only the summation order differs from the reference.
  expectClose(tag + " fp32 out", dOut.download(), y, 1e-4f, sumTolerance(1e-5f, s.in));
  // bf16 output: one rounding (relative 2^-9) after the fp32 sum, and with a
  // bias one more of the product before the bias epilogue adds to it (seen on
  // an H200 with cuBLASLt 13.0: 1.8 ulps of the output where the product was
  // larger than the output), so up to 2^-9 of the largest product as well.
  float largestProduct = 0.f;
  if (bias) {
    std::vector<float> product(y.size());
    linearFwdRef({product.data(), x.data(), w.data(), nullptr, nullptr, nullptr, nullptr, nullptr,
                  s.rows, s.in, s.out});
    for (float p : product)
      largestProduct = std::max(largestProduct, std::fabs(p));
  }
  expectClose(tag + " bf16 out", fromBf16(dOutH.download()), y, 8e-3f,
              sumTolerance(1e-5f, s.in) + 1e-3f + largestProduct / 512.f);
}

} // namespace

int main() {
  requireGpu();
  // 700 and 1030 rows: the bias gradient sums 256-row chunks, then the
  // chunks' sums (two full chunks and a partial one, four and a sliver).
  const Shape shapes[] = {{1, 1, 1},     {5, 3, 7},       {37, 65, 129}, {64, 128, 256},
                          {129, 37, 65}, {256, 512, 384}, {3, 0, 5},     {0, 4, 6},
                          {700, 48, 80}, {1030, 16, 40}};
  LinearContext exact; // LinearMath::Fp32
  LinearContext tf32(LinearMath::Tf32);
  for (const Shape &s : shapes)
    for (bool bias : {false, true}) {
      checkLinear(s, bias, true, exact, 1e-4f, 1e-5f, "fp32");
      checkLinear(s, bias, true, tf32, 1e-2f, 5e-3f, "tf32");
    }
  // No dinp (the first layer), through the process-wide default context too.
  checkLinear({37, 65, 129}, true, false, exact, 1e-4f, 1e-5f, "fp32 no-dinp");
  checkLinear({37, 65, 129}, true, false, LinearContext::processDefault(), 1e-4f, 1e-5f,
              "fp32 default-context");
  for (const Shape &s : {Shape{1, 1, 1}, Shape{37, 65, 129}, Shape{64, 128, 256},
                         Shape{256, 512, 384}, Shape{700, 48, 80}})
    for (bool bias : {false, true})
      checkBf16(s, bias);
  return finish();
}
