//===- CudaOpsTest.cu - The runtime's GPU ops and device layer vs refs ----===//
/// \file
/// The runtime's GPU side beyond the kernels themselves: the glue and the
/// argument mapping of runtime/ops/CudaOps.cu, in the IR's layouts, against
/// the CPU reference kernels mapped the way CpuOps.cpp maps them (CpuOps
/// defines the same symbols as CudaOps, so it cannot be linked here):
/// layerNorm with interleaved [N, 2] statistics, the cross-entropy phases
/// and the gradient with a device-side dloss on a vocabulary slice, the LM
/// head's GEMMs on the [V, C] table, maxOverBlocks; and the device layer
/// (runtime/device/CudaDevice.cpp): the caching allocator's reuse and
/// accounting, fill, accumulate, accumulateSquares and events. Everything
/// runs on a stream of the device layer, as in the trainer.
//===----------------------------------------------------------------------===//
#include "GpuTest.h"

#include "runtime/device/Device.h"
#include "runtime/ops/Ops.h"
#include "stdlib/kernels/crossentropy/CrossEntropy.h"
#include "stdlib/kernels/init/InitialValuesMath.h"
#include "stdlib/kernels/layernorm/LayerNorm.h"
#include "stdlib/kernels/linear/Linear.h"

#include <cstdio>
#include <cstring>
#include <memory>

using namespace mist::gputest;
namespace device = mist::rt::device;
namespace ops = mist::rt::ops;
namespace k = mist::kernels;
using k::Index;

namespace {

/// Before the ops run: DeviceBuffer's uploads may still be in flight
/// (pageable cudaMemcpy), and the ops' stream does not wait for them.
void settle() { CHECK_CUDA(cudaDeviceSynchronize()); }
/// Before the host reads results: the ops ran on the current stream.
void sync() { device::synchronizeStream(device::currentStream()); }

/// Sums of k products of N(0,1) values: absolute error grows like sqrt(k).
float sumTolerance(float perTerm, Index k) {
  return perTerm * std::sqrt(float(std::max<Index>(k, 1)));
}

std::string shape(const char *op, Index a, Index b, Index c = -1) {
  return std::string(op) + " " + std::to_string(a) + "x" + std::to_string(b) +
         (c >= 0 ? "x" + std::to_string(c) : "");
}

void checkLayerNorm(Index rows, Index channels, unsigned seed) {
  const std::string what = shape("layerNorm", rows, channels);
  size_t n = size_t(rows * channels), c = size_t(channels), r = size_t(rows);
  std::vector<float> x = randomVector(n, seed, 2.f), weight = randomVector(c, seed + 1),
                     bias = randomVector(c, seed + 2), dout = randomVector(n, seed + 3),
                     dw0 = randomVector(c, seed + 4), db0 = randomVector(c, seed + 5);
  std::vector<float> out(n), mean(r), rstd(r), dx(n), dw = dw0, db = db0, stats(2 * r);
  k::LayerNormArgs ref{out.data(),  mean.data(), rstd.data(), x.data(),  weight.data(),
                       bias.data(), dx.data(),   dw.data(),   db.data(), dout.data(),
                       rows,        channels,    1e-5f};
  k::layerNormFwdRef(ref);
  k::layerNormBwdRef(ref);
  for (size_t i = 0; i < r; ++i) {
    stats[2 * i] = mean[i];
    stats[2 * i + 1] = rstd[i];
  }

  DeviceBuffer<float> dX(x), dWeight(weight), dBias(bias), dOut(n), dStats(2 * r), dDout(dout),
      dDx(n), dDw(dw0), dDb(db0);
  settle();
  ops::layerNorm(dOut.ptr, dStats.ptr, dX.ptr, dWeight.ptr, dBias.ptr, rows, channels, 1e-5f);
  ops::layerNormGrad(dDx.ptr, dDw.ptr, dDb.ptr, dDout.ptr, dX.ptr, dWeight.ptr, dStats.ptr, rows,
                     channels);
  sync();
  expectClose(what + " out", dOut.download(), out, 1e-4f, 1e-5f);
  expectClose(what + " stats [N, 2]", dStats.download(), stats, 1e-4f, 1e-6f);
  expectClose(what + " dx", dDx.download(), dx, 1e-3f, 1e-4f);
  float paramAtol = 2e-5f * std::sqrt(float(rows)) + 1e-5f;
  expectClose(what + " dweight (+=)", dDw.download(), dw, 1e-4f, paramAtol);
  expectClose(what + " dbias (+=)", dDb.download(), db, 1e-4f, paramAtol);
}

/// One tp rank's slice [vocab, 2 vocab) of a vocabulary of 3 vocab, the
/// phases run back to back (as with one rank, the values already combined).
void checkCrossEntropy(Index rows, Index vocab, unsigned seed) {
  const std::string what = shape("crossEntropy", rows, vocab);
  size_t n = size_t(rows * vocab), r = size_t(rows);
  const Index vocabStart = vocab;
  const float dloss = 0.7f;
  std::vector<float> logits = randomVector(n, seed, 3.f);
  std::vector<int32_t> targets(r);
  std::mt19937 gen(seed + 1);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(3 * vocab - 1));
  for (int32_t &t : targets)
    t = pick(gen);
  targets[0] = int32_t(vocabStart); // in the slice whatever the draw

  std::vector<float> rowMax(r), sumExp(r), targetLogit(r), stats(2 * r), dlogits(n);
  k::CrossEntropyArgs ref{logits.data(),      targets.data(), rowMax.data(), sumExp.data(),
                          targetLogit.data(), nullptr,        rows,          vocab,
                          vocabStart,         rows,           dloss};
  k::crossEntropyMaxRef(ref);
  k::crossEntropySumRef(ref);
  float loss = float(k::crossEntropyLossRef(ref));
  // The gradient from the saved statistics, as CpuOps.cpp computes it.
  std::vector<float> savedMax(r), savedSum(r);
  for (size_t i = 0; i < r; ++i) {
    stats[2 * i] = rowMax[i];
    stats[2 * i + 1] = rowMax[i] + std::log(sumExp[i]);
    savedMax[i] = stats[2 * i];
    savedSum[i] = std::exp(stats[2 * i + 1] - stats[2 * i]);
  }
  k::crossEntropyBwdRef({logits.data(), targets.data(), savedMax.data(), savedSum.data(), nullptr,
                         dlogits.data(), rows, vocab, vocabStart, rows, dloss});

  DeviceBuffer<float> dLogits(logits), dMax(r), dSum(r), dTarget(r), dStats(2 * r), dLoss(1),
      dDloss(std::vector<float>{dloss}), dDlogits(n);
  DeviceBuffer<int32_t> dTargets(targets);
  settle();
  ops::crossEntropyRowMax(dMax.ptr, dLogits.ptr, rows, vocab);
  ops::crossEntropyRowSums(dSum.ptr, dTarget.ptr, dLogits.ptr, dTargets.ptr, dMax.ptr, rows, vocab,
                           vocabStart);
  ops::crossEntropyFinish(dLoss.ptr, dStats.ptr, dMax.ptr, dSum.ptr, dTarget.ptr, rows);
  ops::crossEntropyGrad(dDlogits.ptr, dDloss.ptr, dLogits.ptr, dTargets.ptr, dStats.ptr, rows,
                        vocab, vocabStart);
  sync();
  expectClose(what + " rowMax", dMax.download(), rowMax, 0.f, 0.f);
  expectClose(what + " sumExp", dSum.download(), sumExp, 1e-4f, 0.f);
  expectClose(what + " targetLogit", dTarget.download(), targetLogit, 0.f, 0.f);
  expectClose(what + " loss (mean over rows)", dLoss.download(), {loss}, 1e-5f, 1e-6f);
  expectClose(what + " stats [N, 2]", dStats.download(), stats, 1e-5f, 1e-5f);
  expectClose(what + " dlogits (device dloss)", dDlogits.download(), dlogits, 1e-4f,
              1e-5f * dloss / float(rows));
}

/// logits = x tableᵀ, dx = dlogits table, dtable += dlogitsᵀ x, against
/// the reference (lmHeadFwdRef / lmHeadBwdRef, which CpuOps.cpp calls).
void checkLmHead(Index rows, Index channels, Index vocab, unsigned seed) {
  const std::string what = shape("lmHead", rows, channels, vocab);
  const Index N = rows, C = channels, V = vocab;
  std::vector<float> x = randomVector(size_t(N * C), seed),
                     table = randomVector(size_t(V * C), seed + 1),
                     dlogits = randomVector(size_t(N * V), seed + 2),
                     dtable0 = randomVector(size_t(V * C), seed + 3);
  std::vector<float> logits(size_t(N * V)), dx(size_t(N * C)), dtable = dtable0;
  k::lmHeadFwdRef(logits.data(), x.data(), table.data(), N, C, V);
  k::lmHeadBwdRef(dx.data(), dtable.data(), dlogits.data(), x.data(), table.data(), N, C, V);

  DeviceBuffer<float> dX(x), dTable(table), dLogits(logits.size()), dDlogits(dlogits),
      dDx(dx.size()), dDtable(dtable0);
  settle();
  ops::lmHead(dLogits.ptr, dX.ptr, dTable.ptr, N, C, V);
  ops::lmHeadGrad(dDx.ptr, dDtable.ptr, dDlogits.ptr, dX.ptr, dTable.ptr, N, C, V);
  sync();
  // The ops run their GEMMs on tf32 tensor cores (StreamState in CudaOps.cu):
  // the tolerances of LinearKernelsTest's tf32 checks, not fp32's (seen on an
  // H200: fp32 tolerances fail by about 1e-3 relative, as tf32 rounding does).
  expectClose(what + " logits", dLogits.download(), logits, 1e-2f, sumTolerance(5e-3f, C));
  expectClose(what + " dx", dDx.download(), dx, 1e-2f, sumTolerance(5e-3f, V));
  expectClose(what + " dtable (+=)", dDtable.download(), dtable, 1e-2f, sumTolerance(5e-3f, N));
}

void checkMaxOverBlocks(int count, Index n, unsigned seed) {
  std::vector<float> blocks = randomVector(size_t(count * n), seed), want(static_cast<size_t>(n));
  for (Index i = 0; i < n; ++i) {
    float m = blocks[size_t(i)];
    for (int b = 1; b < count; ++b)
      m = std::max(m, blocks[size_t(b * n + i)]);
    want[size_t(i)] = m;
  }
  DeviceBuffer<float> dBlocks(blocks), dOut(static_cast<size_t>(n));
  settle();
  ops::maxOverBlocks(dOut.ptr, dBlocks.ptr, count, n);
  sync();
  expectClose(shape("maxOverBlocks", count, n), dOut.download(), want, 0.f, 0.f);
}

void expectTrue(const std::string &what, bool ok) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok)
    ++failures();
}

/// adamWMany against one adamW per tensor, bit for bit: 70 tensors (more
/// than one multi-tensor launch holds), fp32 and bf16 weights, two weight
/// decays, a bf16 gradient (the single-tensor path) and an empty tensor.
void checkAdamWMany() {
  using mist::rt::ConstTensor;
  using mist::rt::DType;
  using mist::rt::Tensor;
  const int count = 70;
  struct Copy {
    std::unique_ptr<DeviceBuffer<float>> master, m, v, grad;
    std::unique_ptr<DeviceBuffer<uint16_t>> weights16, grad16;
    std::unique_ptr<DeviceBuffer<float>> weights32;
  };
  auto make = [&](std::vector<Copy> &copies, std::vector<ops::AdamWTensor> &tensors) {
    for (int i = 0; i < count; ++i) {
      const size_t n = i == 5 ? 0 : size_t(1 + 97 * i);
      const bool bf16 = i % 3 == 0, bf16Grad = i == 7;
      const unsigned seed = unsigned(1000 + 10 * i);
      Copy c;
      c.master = std::make_unique<DeviceBuffer<float>>(randomVector(n, seed));
      c.m = std::make_unique<DeviceBuffer<float>>(randomVector(n, seed + 1, 0.1f));
      std::vector<float> v = randomVector(n, seed + 2, 0.1f);
      for (float &x : v)
        x = std::fabs(x);
      c.v = std::make_unique<DeviceBuffer<float>>(v);
      c.grad = std::make_unique<DeviceBuffer<float>>(randomVector(n, seed + 3));
      c.grad16 = std::make_unique<DeviceBuffer<uint16_t>>(std::vector<uint16_t>(n, 0x3f80));
      c.weights16 = std::make_unique<DeviceBuffer<uint16_t>>(n);
      c.weights32 = std::make_unique<DeviceBuffer<float>>(n);
      Tensor param = bf16 ? Tensor(c.weights16->ptr, DType::BF16) : Tensor(c.weights32->ptr);
      ConstTensor grad =
          bf16Grad ? ConstTensor(c.grad16->ptr, DType::BF16) : ConstTensor(c.grad->ptr);
      tensors.push_back({c.master->ptr, c.m->ptr, c.v->ptr, param, grad, mist::kernels::Index(n),
                         i % 2 ? 0.f : 0.1f});
      copies.push_back(std::move(c));
    }
  };
  std::vector<Copy> one, many;
  std::vector<ops::AdamWTensor> singly, together;
  make(one, singly);
  make(many, together);
  settle();
  const ops::AdamWStep step{1e-3f, 0.9f, 0.95f, 1e-8f, 123.f /* not read */, 0.5f, 3};
  for (const ops::AdamWTensor &t : singly) {
    ops::AdamWStep own = step;
    own.weightDecay = t.weightDecay;
    ops::adamW(t.master, t.m, t.v, t.param, t.grad, t.n, own);
  }
  ops::adamWMany(together, step);
  sync();
  // Names the first tensor and array that differ, with the element's values
  // (a count alone left a GPU run with nothing to go on).
  bool same = true;
  auto compare = [&](int i, const char *array, auto got, auto want) {
    for (size_t e = 0; e < want.size() && same; ++e)
      if (std::memcmp(&got[e], &want[e], sizeof(want[e])) != 0) {
        std::printf("     tensor %d (n %zu, %s weights, weight decay %g) %s[%zu]: many %.9g, one "
                    "%.9g\n",
                    i, want.size(), i % 3 == 0 ? "bf16" : "fp32", i % 2 ? 0.0 : 0.1, array, e,
                    double(got[e]), double(want[e]));
        same = false;
      }
  };
  for (int i = 0; i < count && same; ++i) {
    const Copy &a = one[size_t(i)], &b = many[size_t(i)];
    compare(i, "master", b.master->download(), a.master->download());
    compare(i, "m", b.m->download(), a.m->download());
    compare(i, "v", b.v->download(), a.v->download());
    compare(i, "weights32", b.weights32->download(), a.weights32->download());
    compare(i, "weights16 (bits)", b.weights16->download(), a.weights16->download());
  }
  expectTrue("adamWMany equals adamW per tensor, bit for bit (70 tensors)", same);
}

/// Initial values drawn on the GPU against the host's draw of the same
/// function (stdlib/kernels/init/InitialValuesMath.h) for a tp shard of a
/// fused tensor: equal, but for the rare element whose double log or cos
/// rounds to the other side of a float (an ulp; about one in 2^28).
void checkInitialValues() {
  mist::kernels::InitialValuesArgs a{};
  a.n = 3 * 512 * 1000; // rank 1 of 2 of a [3 * 1024, 1000] fused q/k/v weight
  a.key = 0x243f6a8885a308d3ull;
  a.tp = 2;
  a.rank = 1;
  a.groupCount = 3;
  a.inner = 1000;
  a.fullAxis = 3 * 1024;
  a.group[0] = a.group[1] = a.group[2] = 1024;
  DeviceBuffer<float> drawn(size_t(a.n));
  a.out = drawn.ptr;
  ops::drawInitialValues(a, 1);
  sync();
  const std::vector<float> got = drawn.download();
  size_t apart = 0, farther = 0;
  for (Index i = 0; i < a.n; ++i) {
    const float want = mist::kernels::math::initialValueAt(a, i), g = got[size_t(i)];
    if (g != want) {
      ++apart;
      farther += std::fabs(g - want) > std::fabs(want) * 2e-7f ? 1 : 0;
    }
  }
  std::printf("     initial values: %zu of %lld differ from the host's by an ulp\n", apart,
              (long long)a.n);
  expectTrue("initial values drawn on the GPU as on the host (" + std::to_string(a.n) + ")",
             farther == 0 && apart <= 4);
}

/// The device layer's primitives, through its own copies and pinned memory.
void checkDevice() {
  const size_t n = 1000, before = device::bytesInUse();
  auto *a = static_cast<float *>(device::allocate(n * sizeof(float), "test a"));
  auto *b = static_cast<float *>(device::allocate(n * sizeof(float), "test b"));
  auto *sum = static_cast<double *>(device::allocate(sizeof(double), "test sum"));
  auto *ids = static_cast<int32_t *>(device::allocate(n * sizeof(int32_t), "test ids"));
  expectTrue("bytesInUse counts the requested bytes",
             device::bytesInUse() ==
                 before + 2 * n * sizeof(float) + sizeof(double) + n * sizeof(int32_t));
  expectTrue("peakBytes >= bytesInUse", device::peakBytes() >= device::bytesInUse());
  expectTrue("allocate(0) is null", device::allocate(0, "nothing") == nullptr);

  auto *host = static_cast<float *>(device::allocatePinned(n * sizeof(float), "test host"));
  auto *hostSum = static_cast<double *>(device::allocatePinned(sizeof(double), "test host sum"));
  auto *hostIds = static_cast<int32_t *>(device::allocatePinned(n * sizeof(int32_t), "ids"));
  *hostSum = 1.0;
  device::copy(sum, hostSum, sizeof(double));
  device::fill(a, n, 2.f);
  device::fill(b, n, 0.5f);
  device::accumulate(a, b, n);
  device::accumulateSquares(sum, a, n);
  device::fillIds(ids, n, 7);
  device::EventHandle start = device::createEvent(), end = device::createEvent();
  device::recordEvent(start, device::currentStream());
  device::fill(b, n, 0.f);
  device::recordEvent(end, device::currentStream());
  device::copy(host, a, n * sizeof(float));
  device::copy(hostSum, sum, sizeof(double));
  device::copy(hostIds, ids, n * sizeof(int32_t));
  sync();
  expectClose("fill + accumulate", std::vector<float>(host, host + n), std::vector<float>(n, 2.5f),
              0.f, 0.f);
  expectClose("accumulateSquares (1 + 1000 * 2.5^2)", {float(*hostSum)}, {6251.f}, 1e-7f, 0.f);
  expectTrue("fillIds", std::all_of(hostIds, hostIds + n, [](int32_t v) { return v == 7; }));
  expectTrue("elapsedMs >= 0", device::elapsedMs(start, end) >= 0.0);
  device::destroyEvent(start);
  device::destroyEvent(end);

  // A block released on this stream comes back to the next allocation of
  // its size on the same stream, without cudaMalloc.
  device::release(b);
  auto *again = static_cast<float *>(device::allocate(n * sizeof(float) - 4, "test again"));
  expectTrue("a released block is reused on its stream", again == b);
  // One released on another stream comes back too: once its uses are over,
  // or after this stream waits for them (ZeRO-3 gathers on g2g what compute
  // frees; offload swaps in on h2d what compute frees).
  {
    const device::Stream main = device::currentStream(), other = device::createStream();
    device::setCurrentStream(other);
    auto *fromOther = static_cast<float *>(device::allocate(3 * n * sizeof(float), "other"));
    device::fill(fromOther, 3 * n, 2.f);
    device::release(fromOther); // on `other`, the fill still queued perhaps
    device::setCurrentStream(main);
    auto *reused = static_cast<float *>(device::allocate(3 * n * sizeof(float), "reused"));
    expectTrue("a block released on another stream is reused", reused == fromOther);
    device::fill(reused, 3 * n, 5.f); // ordered after the other stream's fill
    std::vector<float> back(3 * n);
    device::synchronizeStream(main);
    device::copy(back.data(), reused, back.size() * sizeof(float));
    device::synchronizeStream(main);
    expectTrue("the reusing stream's writes come last",
               std::all_of(back.begin(), back.end(), [](float v) { return v == 5.f; }));
    device::release(reused);
    device::synchronizeDevice();
    device::destroyStream(other);
  }
  for (void *p : {static_cast<void *>(a), static_cast<void *>(again), static_cast<void *>(sum),
                  static_cast<void *>(ids)})
    device::release(p);
  expectTrue("bytesInUse back to its start", device::bytesInUse() == before);
  device::releasePinned(host);
  device::releasePinned(hostSum);
  device::releasePinned(hostIds);
}

} // namespace

int main() {
  requireGpu();
  std::printf("device: %s (%s)\n", device::initialize(0).c_str(), device::backendName());
  device::Stream stream = device::createStream();
  device::setCurrentStream(stream);

  checkDevice();
  for (auto [rows, channels] : {std::pair<Index, Index>{1, 1}, {7, 33}, {64, 768}, {300, 1031}})
    checkLayerNorm(rows, channels, unsigned(rows * 7 + channels));
  for (auto [rows, vocab] : {std::pair<Index, Index>{1, 5}, {17, 1000}, {64, 50304}})
    checkCrossEntropy(rows, vocab, unsigned(rows * 13 + vocab));
  checkLmHead(33, 64, 100, 1);
  checkLmHead(7, 13, 257, 2);
  checkLmHead(128, 256, 1000, 3);
  checkMaxOverBlocks(1, 100, 4);
  checkMaxOverBlocks(3, 1000, 5);
  checkAdamWMany();
  checkInitialValues();

  device::synchronizeDevice();
  device::setCurrentStream(nullptr);
  device::destroyStream(stream);
  return finish();
}
