//===- Bf16KernelsTest.cu - The bf16 CUDA kernels vs the fp32 references ---===//
/// \file
/// Every bf16 entry point against the fp32 reference kernel run the way the
/// runtime's fp32 staging ran bf16 ops: inputs rounded to bf16 first (so
/// both sides see the same values), the reference in fp32, its bf16 outputs
/// rounded once. A bf16 kernel computes exactly that up to fp32 rounding, so
/// its bf16 outputs may differ from the rounded reference by the one bf16
/// step an fp32 difference can tip (2^-8 relative: tolerances of 1e-2
/// relative plus a small absolute term for cancellations), and its fp32
/// outputs (statistics, parameter gradients, masters) by fp32 rounding.
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/adamw/AdamWCuda.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"
#include "stdlib/kernels/embedding/EmbeddingCuda.h"
#include "stdlib/kernels/layernorm/LayerNormCuda.h"
#include "stdlib/kernels/linear/LinearCuda.h"
#include "stdlib/kernels/rmsnorm/RMSNormCuda.h"
#include "stdlib/kernels/rope/RopeCuda.h"

#include <cuda_bf16.h>

using namespace mist::gputest;
using namespace mist::kernels;
using bf16 = __nv_bfloat16;

namespace {

constexpr float bf16Rtol = 1e-2f;

/// A bf16 device copy of (the bf16 rounding of) `host`.
struct Bf16Buffer : DeviceBuffer<bf16> {
  explicit Bf16Buffer(size_t n) : DeviceBuffer<bf16>(n) {}
  explicit Bf16Buffer(const std::vector<float> &host) : DeviceBuffer<bf16>(toBf16(host)) {}
  std::vector<float> values() const { return toFloat(download()); }
};

/// Random values already on the bf16 grid: what a bf16 tensor holds.
std::vector<float> randomBf16(size_t n, unsigned seed, float scale = 1.f) {
  return roundedToBf16(randomVector(n, seed, scale));
}

void sync() { CHECK_CUDA(cudaDeviceSynchronize()); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

using Fp32Kernel = void (*)(const ElementwiseArgs &);
using Bf16Kernel = cudaError_t (*)(const ElementwiseBf16Args &, cudaStream_t);

void checkElementwise(const char *what, Fp32Kernel ref, Bf16Kernel kernel, bool binary,
                      bool backward, Index n, unsigned seed) {
  std::vector<float> a = randomBf16(size_t(n), seed, 2.f), b = randomBf16(size_t(n), seed + 1),
                     dout = randomBf16(size_t(n), seed + 2);
  std::vector<float> out(static_cast<size_t>(n)), da(static_cast<size_t>(n)),
      db(static_cast<size_t>(n));
  ElementwiseArgs host{
      out.data(),  a.data(), binary ? b.data() : nullptr, da.data(), binary ? db.data() : nullptr,
      dout.data(), n};
  ref(host);
  Bf16Buffer dA(a), dB(b), dDout(dout), dOut(static_cast<size_t>(n)), dDa(static_cast<size_t>(n)),
      dDb(static_cast<size_t>(n));
  ElementwiseBf16Args dev{
      dOut.ptr,  dA.ptr, binary ? dB.ptr : nullptr, dDa.ptr, binary ? dDb.ptr : nullptr,
      dDout.ptr, n};
  CHECK_CUDA(kernel(dev, nullptr));
  sync();
  std::string name = std::string(what) + " bf16 n=" + std::to_string(n);
  if (!backward) {
    expectClose(name + " out", dOut.values(), roundedToBf16(out), bf16Rtol, 1e-6f);
    return;
  }
  expectClose(name + " da", dDa.values(), roundedToBf16(da), bf16Rtol, 1e-6f);
  if (binary)
    expectClose(name + " db", dDb.values(), roundedToBf16(db), bf16Rtol, 1e-6f);
}

void checkElementwiseAll(Index n, unsigned seed) {
  checkElementwise("gelu", geluFwdRef, geluFwdCuda, false, false, n, seed);
  checkElementwise("gelu_grad", geluBwdRef, geluBwdCuda, false, true, n, seed + 10);
  checkElementwise("gelu exact", geluExactFwdRef, geluExactFwdCuda, false, false, n, seed + 20);
  checkElementwise("gelu exact grad", geluExactBwdRef, geluExactBwdCuda, false, true, n, seed + 30);
  checkElementwise("silu", siluFwdRef, siluFwdCuda, false, false, n, seed + 40);
  checkElementwise("silu_grad", siluBwdRef, siluBwdCuda, false, true, n, seed + 50);
  checkElementwise("mul", mulFwdRef, mulFwdCuda, true, false, n, seed + 60);
  checkElementwise("mul_grad", mulBwdRef, mulBwdCuda, true, true, n, seed + 70);
  checkElementwise("add", addFwdRef, addFwdCuda, true, false, n, seed + 80);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

/// fp32 column sums over the rows, in another order than the reference's.
float paramAtol(Index rows) { return 2e-5f * std::sqrt(float(rows)) + 1e-5f; }

void checkLayerNorm(Index rows, Index channels, unsigned seed) {
  const size_t n = size_t(rows * channels), c = size_t(channels), r = size_t(rows);
  std::vector<float> x = randomBf16(n, seed, 2.f), w = randomBf16(c, seed + 1),
                     bias = randomBf16(c, seed + 2), dout = randomBf16(n, seed + 3),
                     dw0 = randomVector(c, seed + 4), db0 = randomVector(c, seed + 5);
  std::vector<float> out(n), mean(r), rstd(r), dx(n), dw = dw0, db = db0;
  LayerNormArgs host{out.data(),  mean.data(), rstd.data(), x.data(),  w.data(),
                     bias.data(), dx.data(),   dw.data(),   db.data(), dout.data(),
                     rows,        channels,    1e-5f};
  layerNormFwdRef(host);
  layerNormBwdRef(host);
  Bf16Buffer dX(x), dW(w), dBias(bias), dDout(dout), dOut(n), dDx(n);
  DeviceBuffer<float> dMean(r), dRstd(r), dDw(dw0), dDb(db0);
  LayerNormBf16Args dev{dOut.ptr, dMean.ptr, dRstd.ptr, dX.ptr, dW.ptr,   dBias.ptr, dDx.ptr,
                        dDw.ptr,  dDb.ptr,   dDout.ptr, rows,   channels, 1e-5f};
  CHECK_CUDA(layerNormFwdCuda(dev, nullptr));
  CHECK_CUDA(layerNormBwdCuda(dev, nullptr));
  sync();
  std::string name = "layernorm bf16 " + std::to_string(rows) + "x" + std::to_string(channels);
  expectClose(name + " out", dOut.values(), roundedToBf16(out), bf16Rtol, 2e-2f);
  expectClose(name + " mean (fp32)", dMean.download(), mean, 1e-4f, 1e-5f);
  expectClose(name + " rstd (fp32)", dRstd.download(), rstd, 1e-4f, 1e-5f);
  expectClose(name + " dx", dDx.values(), roundedToBf16(dx), bf16Rtol, 2e-2f);
  const std::vector<float> firstDw = dDw.download(), firstDb = dDb.download();
  expectClose(name + " dweight (fp32 +=)", firstDw, dw, 1e-4f, paramAtol(rows));
  expectClose(name + " dbias (fp32 +=)", firstDb, db, 1e-4f, paramAtol(rows));
  // Rows of whole vectors sum their chunks in order (norms/NormColumnSums.cu):
  // the same bits on a second run.
  if (channels % 8 == 0) {
    CHECK_CUDA(cudaMemcpy(dDw.ptr, dw0.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(dDb.ptr, db0.data(), c * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(layerNormBwdCuda(dev, nullptr));
    sync();
    const bool same = dDw.download() == firstDw && dDb.download() == firstDb;
    std::printf("%s %s dweight, dbias repeat bit for bit\n", same ? "ok  " : "FAIL", name.c_str());
    if (!same)
      ++failures();
  }
}

void checkRmsNorm(Index rows, Index channels, unsigned seed) {
  const size_t n = size_t(rows * channels), c = size_t(channels), r = size_t(rows);
  std::vector<float> x = randomBf16(n, seed, 2.f), w = randomBf16(c, seed + 1),
                     dout = randomBf16(n, seed + 3), dw0 = randomVector(c, seed + 4);
  std::vector<float> out(n), rstd(r), dx(n), dw = dw0;
  RMSNormArgs host{out.data(), rstd.data(), x.data(), w.data(), dx.data(),
                   dw.data(),  dout.data(), rows,     channels, 1e-5f};
  rmsNormFwdRef(host);
  rmsNormBwdRef(host);
  Bf16Buffer dX(x), dW(w), dDout(dout), dOut(n), dDx(n);
  DeviceBuffer<float> dRstd(r), dDw(dw0);
  RMSNormBf16Args dev{dOut.ptr, dRstd.ptr, dX.ptr, dW.ptr,   dDx.ptr,
                      dDw.ptr,  dDout.ptr, rows,   channels, 1e-5f};
  CHECK_CUDA(rmsNormFwdCuda(dev, nullptr));
  CHECK_CUDA(rmsNormBwdCuda(dev, nullptr));
  sync();
  std::string name = "rmsnorm bf16 " + std::to_string(rows) + "x" + std::to_string(channels);
  expectClose(name + " out", dOut.values(), roundedToBf16(out), bf16Rtol, 2e-2f);
  expectClose(name + " rstd (fp32)", dRstd.download(), rstd, 1e-4f, 1e-5f);
  expectClose(name + " dx", dDx.values(), roundedToBf16(dx), bf16Rtol, 2e-2f);
  expectClose(name + " dweight (fp32 +=)", dDw.download(), dw, 1e-4f, paramAtol(rows));
}

//===----------------------------------------------------------------------===//
// Rope, embeddings
//===----------------------------------------------------------------------===//

void checkRope(Index batch, Index seq, Index heads, Index headDim, Index rotaryDim, bool inverse,
               unsigned seed) {
  const size_t n = size_t(batch * seq * heads * headDim);
  std::vector<float> x = randomBf16(n, seed), out(n);
  ropeRef({out.data(), x.data(), batch, seq, heads, headDim, 10000.f, inverse, rotaryDim});
  Bf16Buffer dX(x), dOut(n);
  CHECK_CUDA(ropeCuda(
      RopeBf16Args{dOut.ptr, dX.ptr, batch, seq, heads, headDim, 10000.f, inverse, rotaryDim},
      nullptr));
  sync();
  expectClose("rope bf16 D=" + std::to_string(headDim) + " R=" + std::to_string(rotaryDim) +
                  (inverse ? " inverse" : ""),
              dOut.values(), roundedToBf16(out), bf16Rtol, 1e-6f);
}

void checkEmbedding(Index tokens, Index channels, Index vocab, unsigned seed) {
  const size_t n = size_t(tokens * channels), t = size_t(vocab * channels);
  std::vector<float> table = randomBf16(t, seed), dout = randomBf16(n, seed + 1),
                     dtable0 = randomVector(t, seed + 2);
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = int32_t((i * 7919 + seed) % size_t(2 * vocab)); // half outside the slice
  const Index vocabStart = vocab / 2;
  std::vector<float> out(n), dtable = dtable0;
  EmbeddingArgs host{out.data(), ids.data(), table.data(), dtable.data(), dout.data(),
                     tokens,     channels,   vocab,        vocabStart};
  embeddingFwdRef(host);
  embeddingBwdRef(host);
  Bf16Buffer dTable(table), dDout(dout), dOut(n);
  DeviceBuffer<int32_t> dIds(ids);
  DeviceBuffer<float> dDtable(dtable0);
  EmbeddingBf16Args dev{dOut.ptr, dIds.ptr, dTable.ptr, dDtable.ptr, dDout.ptr,
                        tokens,   channels, vocab,      vocabStart};
  CHECK_CUDA(embeddingFwdCuda(dev, nullptr));
  CHECK_CUDA(embeddingBwdCuda(dev, nullptr));
  sync();
  expectClose("embedding bf16 out (a copy: exact)", dOut.values(), out, 0.f, 0.f);
  expectClose("embedding bf16 dtable (fp32 +=)", dDtable.download(), dtable, 1e-5f, 1e-5f);
}

//===----------------------------------------------------------------------===//
// Cross entropy, AdamW
//===----------------------------------------------------------------------===//

void checkCrossEntropy(Index rows, Index vocab, unsigned seed) {
  const size_t n = size_t(rows * vocab), r = size_t(rows);
  std::vector<float> logits = randomBf16(n, seed, 3.f);
  std::vector<int32_t> targets(r);
  for (size_t i = 0; i < r; ++i)
    targets[i] = int32_t((i * 104729 + seed) % size_t(vocab));
  std::vector<float> rowMax(r), sumExp(r), target(r), dlogits(n);
  CrossEntropyArgs host{logits.data(),
                        targets.data(),
                        rowMax.data(),
                        sumExp.data(),
                        target.data(),
                        dlogits.data(),
                        rows,
                        vocab,
                        0,
                        rows,
                        0.5f};
  crossEntropyMaxRef(host);
  crossEntropySumRef(host);
  crossEntropyBwdRef(host);
  Bf16Buffer dLogits(logits), dDlogits(n);
  DeviceBuffer<int32_t> dTargets(targets);
  DeviceBuffer<float> dMax(r), dSum(r), dTarget(r);
  CrossEntropyBf16Args dev{dLogits.ptr, dTargets.ptr, dMax.ptr, dSum.ptr, dTarget.ptr, dDlogits.ptr,
                           rows,        vocab,        0,        rows,     0.5f};
  CHECK_CUDA(crossEntropyMaxCuda(dev, nullptr));
  CHECK_CUDA(crossEntropySumCuda(dev, nullptr));
  CHECK_CUDA(crossEntropyBwdCuda(dev, nullptr));
  sync();
  std::string name = "cross entropy bf16 " + std::to_string(rows) + "x" + std::to_string(vocab);
  expectClose(name + " rowMax (exact)", dMax.download(), rowMax, 0.f, 0.f);
  expectClose(name + " sumExp", dSum.download(), sumExp, 1e-4f, 0.f);
  expectClose(name + " targetLogit (exact)", dTarget.download(), target, 0.f, 0.f);
  expectClose(name + " dlogits", dDlogits.values(), roundedToBf16(dlogits), bf16Rtol,
              1e-7f * 0.5f / float(rows));
}

void checkAdamW(Index n, unsigned seed) {
  std::vector<float> master = randomVector(size_t(n), seed), m = randomVector(size_t(n), seed + 1),
                     v = roundedToBf16(randomVector(size_t(n), seed + 2)),
                     grad = randomVector(size_t(n), seed + 3), param(static_cast<size_t>(n));
  for (float &x : v)
    x = std::fabs(x);
  DeviceBuffer<float> dMaster(master), dM(m), dV(v), dGrad(grad);
  Bf16Buffer dParam(static_cast<size_t>(n));
  adamWRef({master.data(), m.data(), v.data(), param.data(), grad.data(), n, 1e-3f, 0.9f, 0.95f,
            1e-8f, 0.1f, 0.5f, 3});
  CHECK_CUDA(adamWCuda(AdamWBf16Args{dMaster.ptr, dM.ptr, dV.ptr, dParam.ptr, dGrad.ptr, n, 1e-3f,
                                     0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 3},
                       nullptr));
  sync();
  expectClose("adamw bf16 master (fp32)", dMaster.download(), master, 1e-5f, 1e-7f);
  expectClose("adamw bf16 param (the master rounded)", dParam.values(), roundedToBf16(master),
              bf16Rtol, 1e-7f);
}

//===----------------------------------------------------------------------===//
// Linear
//===----------------------------------------------------------------------===//

/// Sums of k products of N(0,1) values grow like sqrt(k): a bf16 step there.
float sumAtol(float perTerm, Index k) { return perTerm * std::sqrt(float(std::max<Index>(k, 1))); }

void checkLinear(Index rows, Index in, Index outF, bool withBias, unsigned seed) {
  const size_t x = size_t(rows * in), w = size_t(in * outF), y = size_t(rows * outF);
  std::vector<float> inp = randomBf16(x, seed), weight = randomBf16(w, seed + 1),
                     bias = randomBf16(static_cast<size_t>(outF), seed + 2),
                     dout = randomBf16(y, seed + 3), dw0 = randomVector(w, seed + 4),
                     db0 = randomVector(static_cast<size_t>(outF), seed + 5);
  std::vector<float> out(y), dinp(x), dw = dw0, db = db0;
  LinearArgs host{out.data(),
                  inp.data(),
                  weight.data(),
                  withBias ? bias.data() : nullptr,
                  dinp.data(),
                  dw.data(),
                  withBias ? db.data() : nullptr,
                  dout.data(),
                  rows,
                  in,
                  outF};
  linearFwdRef(host);
  linearBwdRef(host);
  Bf16Buffer dInp(inp), dWeight(weight), dBias(bias), dDout(dout), dOut(y), dDinp(x);
  DeviceBuffer<float> dDw(dw0), dDb(db0);
  LinearBf16Args dev{dOut.ptr,
                     dInp.ptr,
                     dWeight.ptr,
                     withBias ? dBias.ptr : nullptr,
                     dDinp.ptr,
                     dDw.ptr,
                     withBias ? dDb.ptr : nullptr,
                     dDout.ptr,
                     rows,
                     in,
                     outF};
  LinearContext ctx;
  cublasStatus_t rc = linearFwdCuda(dev, nullptr, &ctx);
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = linearBwdCuda(dev, nullptr, &ctx);
  sync();
  std::string name = "linear bf16 " + std::to_string(rows) + "x" + std::to_string(in) + "x" +
                     std::to_string(outF) + (withBias ? " +bias" : "");
  if (rc != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL %s: %s\n", name.c_str(), cublasLtGetStatusString(rc));
    ++failures();
    return;
  }
  expectClose(name + " out", dOut.values(), roundedToBf16(out), bf16Rtol, sumAtol(1e-3f, in));
  expectClose(name + " dinp", dDinp.values(), roundedToBf16(dinp), bf16Rtol, sumAtol(1e-3f, outF));
  expectClose(name + " dweight (fp32 +=)", dDw.download(), dw, 1e-4f, sumAtol(1e-5f, rows));
  if (withBias)
    expectClose(name + " dbias (fp32 +=)", dDb.download(), db, 1e-4f, sumAtol(1e-5f, rows));
}

/// The fused first MLP layer: out = gelu(x W + b) with the pre-activation
/// kept, and the backward of the next layer with the GELU gradient, against
/// the reference linear and GELU kernels (the fused GELU reads the fp32 sum,
/// the reference the same sum: bf16 rounding apart, they agree).
void checkLinearGelu(Index rows, Index in, Index outF, unsigned seed) {
  const size_t x = size_t(rows * in), w = size_t(in * outF), y = size_t(rows * outF);
  std::vector<float> inp = randomBf16(x, seed), weight = randomBf16(w, seed + 1, 0.2f),
                     bias = randomBf16(static_cast<size_t>(outF), seed + 2),
                     dout = randomBf16(x, seed + 3), dw0 = randomVector(w, seed + 4),
                     db0 = randomVector(static_cast<size_t>(outF), seed + 5);
  // Forward reference: preact = x W + b in fp32, out = gelu(preact).
  std::vector<float> preact(y), out(y);
  linearFwdRef({preact.data(), inp.data(), weight.data(), bias.data(), nullptr, nullptr, nullptr,
                nullptr, rows, in, outF});
  geluFwdRef({out.data(), preact.data(), nullptr, nullptr, nullptr, nullptr, Index(y)});
  // Backward of a layer reading act = gelu(preact) [rows, outF] with a weight
  // [outF, in]: dact = dout W2ᵀ, dpreact = gelu'(preact) dact.
  const std::vector<float> preactStored = roundedToBf16(preact), act = roundedToBf16(out);
  std::vector<float> w2 = randomBf16(w, seed + 6, 0.2f), dact(y), dpreact(y), dw = dw0, db = db0;
  linearBwdRef({nullptr, act.data(), w2.data(), nullptr, dact.data(), dw.data(), db.data(),
                dout.data(), rows, outF, in});
  geluBwdRef(
      {nullptr, preactStored.data(), nullptr, dpreact.data(), nullptr, dact.data(), Index(y)});

  Bf16Buffer dInp(inp), dWeight(weight), dBias(bias), dOut(y), dPreact(y);
  LinearContext ctx;
  std::string name = "linear+gelu bf16 " + std::to_string(rows) + "x" + std::to_string(in) + "x" +
                     std::to_string(outF);
  cublasStatus_t rc = linearGeluFwdCuda({dOut.ptr, dInp.ptr, dWeight.ptr, dBias.ptr, nullptr,
                                         nullptr, nullptr, nullptr, rows, in, outF},
                                        dPreact.ptr, nullptr, &ctx);
  Bf16Buffer dAct(act), dW2(w2), dDout(dout), dStoredPreact(preactStored), dDpreact(y), dDact(y);
  DeviceBuffer<float> dDw(dw0), dDb(db0);
  if (rc == CUBLAS_STATUS_SUCCESS)
    rc = linearBwdDgeluCuda({nullptr, dAct.ptr, dW2.ptr, nullptr, dDpreact.ptr, dDw.ptr, dDb.ptr,
                             dDout.ptr, rows, outF, in},
                            dStoredPreact.ptr, dDact.ptr, nullptr, &ctx);
  sync();
  if (rc != CUBLAS_STATUS_SUCCESS) {
    std::printf("FAIL %s: %s\n", name.c_str(), cublasLtGetStatusString(rc));
    ++failures();
    return;
  }
  expectClose(name + " preact", dPreact.values(), roundedToBf16(preact), bf16Rtol,
              sumAtol(1e-3f, in));
  expectClose(name + " out = gelu(preact)", dOut.values(), roundedToBf16(out), 2 * bf16Rtol,
              sumAtol(1e-3f, in));
  expectClose(name + " dpreact", dDpreact.values(), roundedToBf16(dpreact), 2 * bf16Rtol,
              sumAtol(1e-3f, in));
  expectClose(name + " dweight (fp32 +=)", dDw.download(), dw, 1e-4f, sumAtol(1e-5f, rows));
  expectClose(name + " dbias (fp32 +=)", dDb.download(), db, 1e-4f, sumAtol(1e-5f, rows));
}

/// The residual add fused into the norms equals add then norm bit for bit.
void checkResidualNorms(Index rows, Index channels, unsigned seed) {
  const size_t n = size_t(rows * channels), c = size_t(channels), r = size_t(rows);
  std::vector<float> x = randomBf16(n, seed, 2.f), residual = randomBf16(n, seed + 1),
                     w = randomBf16(c, seed + 2), bias = randomBf16(c, seed + 3);
  Bf16Buffer dX(x), dResidual(residual), dW(w), dBias(bias), sumA(n), sumB(n), outA(n), outB(n);
  DeviceBuffer<float> meanA(r), rstdA(r), meanB(r), rstdB(r);
  const std::string name =
      "add + norm bf16 " + std::to_string(rows) + "x" + std::to_string(channels);
  // Unfused: the add kernel, then each norm on its stored sum.
  CHECK_CUDA(addFwdCuda(
      ElementwiseBf16Args{sumA.ptr, dX.ptr, dResidual.ptr, nullptr, nullptr, nullptr, Index(n)},
      nullptr));
  LayerNormBf16Args ln{outA.ptr, meanA.ptr, rstdA.ptr, sumA.ptr, dW.ptr,   dBias.ptr, nullptr,
                       nullptr,  nullptr,   nullptr,   rows,     channels, 1e-5f};
  CHECK_CUDA(layerNormFwdCuda(ln, nullptr));
  LayerNormBf16Args fused = ln;
  fused.out = outB.ptr;
  fused.mean = meanB.ptr;
  fused.rstd = rstdB.ptr;
  fused.inp = nullptr;
  CHECK_CUDA(addLayerNormFwdCuda(fused, sumB.ptr, dX.ptr, dResidual.ptr, nullptr));
  sync();
  expectClose(name + " layernorm: sum", sumB.values(), sumA.values(), 0.f, 0.f);
  expectClose(name + " layernorm: out", outB.values(), outA.values(), 0.f, 0.f);
  expectClose(name + " layernorm: rstd", rstdB.download(), rstdA.download(), 0.f, 0.f);
  RMSNormBf16Args rms{outA.ptr, rstdA.ptr, sumA.ptr, dW.ptr,   nullptr,
                      nullptr,  nullptr,   rows,     channels, 1e-5f};
  CHECK_CUDA(rmsNormFwdCuda(rms, nullptr));
  RMSNormBf16Args fusedRms = rms;
  fusedRms.out = outB.ptr;
  fusedRms.rstd = rstdB.ptr;
  fusedRms.inp = nullptr;
  CHECK_CUDA(cudaMemset(sumB.ptr, 0, n * sizeof(bf16)));
  CHECK_CUDA(addRmsNormFwdCuda(fusedRms, sumB.ptr, dX.ptr, dResidual.ptr, nullptr));
  sync();
  expectClose(name + " rmsnorm: sum", sumB.values(), sumA.values(), 0.f, 0.f);
  expectClose(name + " rmsnorm: out", outB.values(), outA.values(), 0.f, 0.f);
  expectClose(name + " rmsnorm: rstd", rstdB.download(), rstdA.download(), 0.f, 0.f);
}

} // namespace

int main() {
  requireGpu();
  checkElementwiseAll(1, 1);
  checkElementwiseAll(100003, 2);
  checkLayerNorm(1, 1, 3);
  checkLayerNorm(64, 768, 4);
  checkLayerNorm(300, 1031, 5);
  checkLayerNorm(5000, 64, 6); // dweight over row chunks (atomics)
  // Rows of whole 16-byte vectors take the vector kernels: one vector a
  // thread (2048), and several (4104: 513 vectors over 256 threads).
  checkLayerNorm(33, 2048, 16);
  checkLayerNorm(9, 4104, 17);
  checkLayerNorm(5, 4096, 29);  // two vectors a thread (GPT-3 6.7B's hidden)
  checkLayerNorm(3, 12288, 30); // six a thread forward (GPT-3 175B's); dinp on the scalar kernel
  checkRmsNorm(64, 768, 7);
  checkRmsNorm(17, 1031, 8);
  checkRmsNorm(9, 4104, 28); // several vectors a thread
  checkRmsNorm(5, 4096, 31);
  checkRope(2, 33, 3, 64, 0, false, 9);
  checkRope(2, 33, 3, 64, 32, true, 10);
  checkEmbedding(1000, 64, 50, 11);
  checkEmbedding(300, 1031, 7, 12);
  checkCrossEntropy(17, 1000, 13);
  checkCrossEntropy(64, 50304, 14);
  checkCrossEntropy(9, 1001, 27); // not whole 16-byte vectors: the scalar kernels
  checkAdamW(1, 15);
  checkAdamW(100003, 16);
  checkLinear(1, 1, 1, true, 17);
  checkLinear(33, 64, 100, true, 18);
  checkLinear(128, 256, 1000, false, 19);
  checkLinear(512, 768, 2304, true, 20);
  checkLinear(7, 13, 257, true, 21); // odd sizes: unaligned leading dimensions
  checkLinearGelu(128, 256, 1024, 22);
  checkLinearGelu(512, 768, 3072, 23);
  checkLinearGelu(7, 13, 257, 24); // no GELU epilogue for these: the unfused fallback
  checkResidualNorms(64, 768, 25);
  checkResidualNorms(300, 1031, 26);
  checkResidualNorms(16, 4096, 32); // two vectors a thread
  return finish();
}
