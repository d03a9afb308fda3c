//===- NormKernelsTest.cu - CUDA LayerNorm and RMSNorm vs reference -------===//
/// \file
/// Forward (out and the saved statistics) and backward (dinp written,
/// dweight / dbias accumulated into prefilled values) at row widths below,
/// at and above the block size, odd ones included, and at many rows with
/// few channels (the dweight column sums split over row chunks and added
/// with atomics).
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "stdlib/kernels/layernorm/LayerNormCuda.h"
#include "stdlib/kernels/rmsnorm/RMSNormCuda.h"

using namespace mist::gputest;
using namespace mist::kernels;

namespace {

struct Shape {
  Index rows, channels;
};

const Shape shapes[] = {{1, 1},     {3, 7},    {7, 33},    {64, 64},    {100, 128}, {33, 1000},
                        {17, 1031}, {4, 4096}, {5000, 64}, {2048, 100}, {3, 40000}};

std::string name(const char *op, Shape s) {
  return std::string(op) + " " + std::to_string(s.rows) + "x" + std::to_string(s.channels);
}

/// Column sums over many rows: the reference adds row by row in fp32, the
/// kernel in another order; the difference grows like sqrt(rows).
float paramAtol(Index rows) { return 2e-5f * std::sqrt(float(rows)) + 1e-5f; }

void checkLayerNorm(Shape s, bool withBias, unsigned seed) {
  size_t n = size_t(s.rows * s.channels), c = size_t(s.channels), r = size_t(s.rows);
  std::vector<float> inp = randomVector(n, seed, 2.f);
  for (float &x : inp)
    x += 0.5f; // a nonzero mean
  std::vector<float> weight = randomVector(c, seed + 1), bias = randomVector(c, seed + 2),
                     dout = randomVector(n, seed + 3);
  // Prefilled: outputs must be overwritten, dweight / dbias added to.
  std::vector<float> out = randomVector(n, seed + 4), mean = randomVector(r, seed + 5),
                     rstd = randomVector(r, seed + 6), dinp = randomVector(n, seed + 7),
                     dweight = randomVector(c, seed + 8), dbias = randomVector(c, seed + 9);
  DeviceBuffer<float> dInp(inp), dWeight(weight), dBias(bias), dDout(dout), dOut(out), dMean(mean),
      dRstd(rstd), dDinp(dinp), dDweight(dweight), dDbias(dbias);
  LayerNormArgs host{out.data(),  mean.data(),    rstd.data(),
                     inp.data(),  weight.data(),  withBias ? bias.data() : nullptr,
                     dinp.data(), dweight.data(), withBias ? dbias.data() : nullptr,
                     dout.data(), s.rows,         s.channels,
                     1e-5f};
  LayerNormArgs dev{dOut.ptr,  dMean.ptr,    dRstd.ptr,
                    dInp.ptr,  dWeight.ptr,  withBias ? dBias.ptr : nullptr,
                    dDinp.ptr, dDweight.ptr, withBias ? dDbias.ptr : nullptr,
                    dDout.ptr, s.rows,       s.channels,
                    1e-5f};
  std::string what = name(withBias ? "layernorm" : "layernorm (no bias)", s);

  layerNormFwdRef(host);
  CHECK_CUDA(layerNormFwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " out", dOut.download(), out, 1e-4f, 1e-5f);
  expectClose(what + " mean", dMean.download(), mean, 1e-4f, 1e-5f);
  expectClose(what + " rstd", dRstd.download(), rstd, 1e-4f, 1e-5f);

  // Backward from the same saved statistics on both sides.
  CHECK_CUDA(cudaMemcpy(dMean.ptr, mean.data(), r * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dRstd.ptr, rstd.data(), r * sizeof(float), cudaMemcpyHostToDevice));
  layerNormBwdRef(host);
  CHECK_CUDA(layerNormBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " dinp", dDinp.download(), dinp, 1e-4f, 1e-5f);
  expectClose(what + " dweight (accumulated)", dDweight.download(), dweight, 1e-4f,
              paramAtol(s.rows));
  std::vector<float> dbiasGot = dDbias.download();
  if (withBias)
    expectClose(what + " dbias (accumulated)", dbiasGot, dbias, 1e-4f, paramAtol(s.rows));
  else // the null dbias is not touched: the device buffer keeps its prefill
    expectClose(what + " dbias untouched", dbiasGot, dbias, 0.f, 0.f);
}

void checkRmsNorm(Shape s, unsigned seed) {
  size_t n = size_t(s.rows * s.channels), c = size_t(s.channels), r = size_t(s.rows);
  std::vector<float> inp = randomVector(n, seed, 2.f), weight = randomVector(c, seed + 1),
                     dout = randomVector(n, seed + 2);
  std::vector<float> out = randomVector(n, seed + 3), rstd = randomVector(r, seed + 4),
                     dinp = randomVector(n, seed + 5), dweight = randomVector(c, seed + 6);
  DeviceBuffer<float> dInp(inp), dWeight(weight), dDout(dout), dOut(out), dRstd(rstd), dDinp(dinp),
      dDweight(dweight);
  RMSNormArgs host{out.data(),     rstd.data(), inp.data(), weight.data(), dinp.data(),
                   dweight.data(), dout.data(), s.rows,     s.channels,    1e-5f};
  RMSNormArgs dev{dOut.ptr,     dRstd.ptr, dInp.ptr, dWeight.ptr, dDinp.ptr,
                  dDweight.ptr, dDout.ptr, s.rows,   s.channels,  1e-5f};
  std::string what = name("rmsnorm", s);

  rmsNormFwdRef(host);
  CHECK_CUDA(rmsNormFwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " out", dOut.download(), out, 1e-4f, 1e-5f);
  expectClose(what + " rstd", dRstd.download(), rstd, 1e-4f, 1e-5f);

  CHECK_CUDA(cudaMemcpy(dRstd.ptr, rstd.data(), r * sizeof(float), cudaMemcpyHostToDevice));
  rmsNormBwdRef(host);
  CHECK_CUDA(rmsNormBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " dinp", dDinp.download(), dinp, 1e-4f, 1e-5f);
  expectClose(what + " dweight (accumulated)", dDweight.download(), dweight, 1e-4f,
              paramAtol(s.rows));
}

/// Backward with dinp the same buffer as dout (the headers allow it): the
/// reference runs out of place.
void checkBackwardInPlace() {
  Shape s{300, 1000};
  size_t n = size_t(s.rows * s.channels), c = size_t(s.channels), r = size_t(s.rows);
  std::vector<float> inp = randomVector(n, 601), weight = randomVector(c, 602),
                     bias = randomVector(c, 603), dout = randomVector(n, 604), out(n), mean(r),
                     rstd(r), dinp(n), dweight = randomVector(c, 605), dbias = randomVector(c, 606);
  DeviceBuffer<float> dInp(inp), dWeight(weight), dBias(bias), dGrad(dout), dOut(n), dMean(r),
      dRstd(r), dDweight(dweight), dDbias(dbias);
  LayerNormArgs host{out.data(),  mean.data(), rstd.data(),    inp.data(),   weight.data(),
                     bias.data(), dinp.data(), dweight.data(), dbias.data(), dout.data(),
                     s.rows,      s.channels,  1e-5f};
  LayerNormArgs dev{dOut.ptr,  dMean.ptr,  dRstd.ptr,    dInp.ptr,   dWeight.ptr,
                    dBias.ptr, dGrad.ptr,  dDweight.ptr, dDbias.ptr, dGrad.ptr,
                    s.rows,    s.channels, 1e-5f};
  layerNormFwdRef(host);
  layerNormBwdRef(host);
  CHECK_CUDA(layerNormFwdCuda(dev, nullptr));
  CHECK_CUDA(layerNormBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose("layernorm dinp in place of dout", dGrad.download(), dinp, 1e-4f, 1e-5f);
  expectClose("layernorm dweight, dinp in place", dDweight.download(), dweight, 1e-4f,
              paramAtol(s.rows));
  expectClose("layernorm dbias, dinp in place", dDbias.download(), dbias, 1e-4f, paramAtol(s.rows));

  std::vector<float> rmsDinp(n), rmsDweight = randomVector(c, 607);
  DeviceBuffer<float> rmsGrad(dout), rmsDw(rmsDweight);
  RMSNormArgs rmsHost{out.data(),        rstd.data(), inp.data(), weight.data(), rmsDinp.data(),
                      rmsDweight.data(), dout.data(), s.rows,     s.channels,    1e-5f};
  RMSNormArgs rmsDev{dOut.ptr,  dRstd.ptr,   dInp.ptr, dWeight.ptr, rmsGrad.ptr,
                     rmsDw.ptr, rmsGrad.ptr, s.rows,   s.channels,  1e-5f};
  rmsNormFwdRef(rmsHost);
  rmsNormBwdRef(rmsHost);
  CHECK_CUDA(rmsNormFwdCuda(rmsDev, nullptr));
  CHECK_CUDA(rmsNormBwdCuda(rmsDev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose("rmsnorm dinp in place of dout", rmsGrad.download(), rmsDinp, 1e-4f, 1e-5f);
  expectClose("rmsnorm dweight, dinp in place", rmsDw.download(), rmsDweight, 1e-4f,
              paramAtol(s.rows));
}

/// Two backward passes add twice (gradient accumulation over micro-batches).
void checkAccumulatesTwice() {
  Shape s{300, 96};
  size_t n = size_t(s.rows * s.channels), c = size_t(s.channels), r = size_t(s.rows);
  std::vector<float> inp = randomVector(n, 501), weight = randomVector(c, 502),
                     dout = randomVector(n, 503), rstd(r), out(n), dinp(n),
                     dweight = randomVector(c, 504);
  DeviceBuffer<float> dInp(inp), dWeight(weight), dDout(dout), dOut(n), dRstd(r), dDinp(n),
      dDweight(dweight);
  RMSNormArgs host{out.data(),     rstd.data(), inp.data(), weight.data(), dinp.data(),
                   dweight.data(), dout.data(), s.rows,     s.channels,    1e-6f};
  RMSNormArgs dev{dOut.ptr,     dRstd.ptr, dInp.ptr, dWeight.ptr, dDinp.ptr,
                  dDweight.ptr, dDout.ptr, s.rows,   s.channels,  1e-6f};
  rmsNormFwdRef(host);
  rmsNormBwdRef(host);
  rmsNormBwdRef(host);
  CHECK_CUDA(rmsNormFwdCuda(dev, nullptr));
  CHECK_CUDA(rmsNormBwdCuda(dev, nullptr));
  CHECK_CUDA(rmsNormBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose("rmsnorm dweight after two backward passes", dDweight.download(), dweight, 1e-4f,
              2 * paramAtol(s.rows));
}

} // namespace

int main() {
  requireGpu();
  unsigned seed = 1;
  for (Shape s : shapes) {
    checkLayerNorm(s, true, seed += 20);
    checkLayerNorm(s, false, seed += 20);
    checkRmsNorm(s, seed += 20);
  }
  checkAccumulatesTwice();
  checkBackwardInPlace();

  LayerNormArgs bad{};
  bad.rows = -1;
  if (layerNormFwdCuda(bad, nullptr) != cudaErrorInvalidValue ||
      rmsNormBwdCuda(
          RMSNormArgs{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 4, -1, 1e-5f},
          nullptr) != cudaErrorInvalidValue) {
    std::printf("FAIL negative sizes are not refused\n");
    ++failures();
  }
  return finish();
}
