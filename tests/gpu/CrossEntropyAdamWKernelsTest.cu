//===- CrossEntropyAdamWKernelsTest.cu - CUDA cross-entropy, AdamW vs ref -===//
#include "GpuTest.h"

#include "stdlib/kernels/adamw/AdamWCuda.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"

#include <memory>

using namespace mist::gputest;
using namespace mist::kernels;

namespace {

std::vector<int32_t> randomTargets(size_t rows, int32_t below, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> pick(0, below - 1);
  std::vector<int32_t> targets(rows);
  for (int32_t &t : targets)
    t = pick(gen);
  return targets;
}

/// Every phase on one rank holding the slice [vocabStart, vocabStart +
/// vocab) of a vocabulary of 3 * vocab: each phase reads the reference's
/// output of the phase before, so each is compared on its own.
void checkPhases(Index rows, Index vocab, unsigned seed) {
  size_t n = size_t(rows * vocab), r = size_t(rows);
  std::string what =
      "cross entropy " + std::to_string(rows) + " rows x " + std::to_string(vocab) + " vocab";
  std::vector<float> logits = randomVector(n, seed, 3.f);
  std::vector<int32_t> targets = randomTargets(r, int32_t(3 * vocab), seed + 1);
  targets[0] = int32_t(vocab); // in the slice whatever the draw
  std::vector<float> rowMax(r), sumExp(r), targetLogit(r), dlogits = randomVector(n, seed + 2);
  DeviceBuffer<float> dLogits(logits), dRowMax(r), dSumExp(r), dTarget(r), dDlogits(dlogits),
      dLoss(1);
  DeviceBuffer<int32_t> dTargets(targets);
  Index totalRows = 2 * rows; // as if another dp rank held as many rows
  CrossEntropyArgs host{logits.data(),
                        targets.data(),
                        rowMax.data(),
                        sumExp.data(),
                        targetLogit.data(),
                        dlogits.data(),
                        rows,
                        vocab,
                        vocab,
                        totalRows,
                        0.7f};
  CrossEntropyArgs dev{dLogits.ptr, dTargets.ptr, dRowMax.ptr, dSumExp.ptr,
                       dTarget.ptr, dDlogits.ptr, rows,        vocab,
                       vocab,       totalRows,    0.7f};

  crossEntropyMaxRef(host);
  CHECK_CUDA(crossEntropyMaxCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " max", dRowMax.download(), rowMax, 0.f, 0.f);

  crossEntropySumRef(host);
  CHECK_CUDA(cudaMemcpy(dRowMax.ptr, rowMax.data(), r * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(crossEntropySumCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " sumExp", dSumExp.download(), sumExp, 1e-4f, 0.f);
  expectClose(what + " targetLogit", dTarget.download(), targetLogit, 0.f, 0.f);

  CHECK_CUDA(cudaMemcpy(dSumExp.ptr, sumExp.data(), r * sizeof(float), cudaMemcpyHostToDevice));
  float loss = float(crossEntropyLossRef(host));
  CHECK_CUDA(crossEntropyLossCuda(dev, dLoss.ptr, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " loss", dLoss.download(), {loss}, 1e-5f, 1e-6f);

  crossEntropyBwdRef(host);
  CHECK_CUDA(crossEntropyBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  // dlogits are about dloss / (totalRows * vocab): the atol scales with them.
  expectClose(what + " dlogits", dDlogits.download(), dlogits, 1e-4f,
              1e-5f * 0.7f / float(totalRows));
}

/// The vocabulary split over `ranks` slices, combined as TpContext does
/// (max of the maxima, sums of sumExp and targetLogit), against the
/// reference on the whole vocabulary: loss and every rank's dlogits.
void checkTensorParallel(Index rows, Index vocab, int ranks, unsigned seed) {
  size_t r = size_t(rows), slice = size_t(rows * vocab);
  Index fullVocab = vocab * ranks;
  std::string what = "cross entropy over " + std::to_string(ranks) + " ranks, " +
                     std::to_string(rows) + " rows x " + std::to_string(vocab);
  std::vector<float> full = randomVector(size_t(rows * fullVocab), seed, 3.f);
  std::vector<int32_t> targets = randomTargets(r, int32_t(fullVocab), seed + 1);
  std::vector<float> rowMax(r), sumExp(r), targetLogit(r), dfull(full.size());
  CrossEntropyArgs whole{full.data(),
                         targets.data(),
                         rowMax.data(),
                         sumExp.data(),
                         targetLogit.data(),
                         dfull.data(),
                         rows,
                         fullVocab,
                         0,
                         rows,
                         1.f};
  crossEntropyMaxRef(whole);
  crossEntropySumRef(whole);
  float wantLoss = float(crossEntropyLossRef(whole));
  crossEntropyBwdRef(whole);

  DeviceBuffer<int32_t> dTargets(targets);
  std::vector<std::vector<float>> maxima(ranks), sums(ranks), owned(ranks);
  using Buffer = std::unique_ptr<DeviceBuffer<float>>;
  std::vector<Buffer> logits, dlogits, dMax, dSum, dTarget;
  std::vector<CrossEntropyArgs> args;
  for (int k = 0; k < ranks; ++k) {
    std::vector<float> mine(slice);
    for (Index n = 0; n < rows; ++n)
      std::copy_n(full.begin() + n * fullVocab + k * vocab, vocab, mine.begin() + n * vocab);
    logits.push_back(std::make_unique<DeviceBuffer<float>>(mine));
    dlogits.push_back(std::make_unique<DeviceBuffer<float>>(slice));
    dMax.push_back(std::make_unique<DeviceBuffer<float>>(r));
    dSum.push_back(std::make_unique<DeviceBuffer<float>>(r));
    dTarget.push_back(std::make_unique<DeviceBuffer<float>>(r));
    args.push_back({logits[k]->ptr, dTargets.ptr, dMax[k]->ptr, dSum[k]->ptr, dTarget[k]->ptr,
                    dlogits[k]->ptr, rows, vocab, k * vocab, rows, 1.f});
    CHECK_CUDA(crossEntropyMaxCuda(args[k], nullptr));
  }
  std::vector<float> groupMax(r, -INFINITY), groupSum(r, 0.f), groupTarget(r, 0.f);
  for (int k = 0; k < ranks; ++k) {
    std::vector<float> m = dMax[k]->download();
    for (size_t n = 0; n < r; ++n)
      groupMax[n] = std::max(groupMax[n], m[n]);
  }
  for (int k = 0; k < ranks; ++k) {
    CHECK_CUDA(
        cudaMemcpy(dMax[k]->ptr, groupMax.data(), r * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(crossEntropySumCuda(args[k], nullptr));
    std::vector<float> s = dSum[k]->download(), t = dTarget[k]->download();
    for (size_t n = 0; n < r; ++n) {
      groupSum[n] += s[n];
      groupTarget[n] += t[n];
    }
  }
  expectClose(what + " max", groupMax, rowMax, 0.f, 0.f);
  expectClose(what + " sumExp", groupSum, sumExp, 1e-4f, 0.f);
  expectClose(what + " targetLogit", groupTarget, targetLogit, 0.f, 0.f);
  DeviceBuffer<float> dLoss(1);
  for (int k = 0; k < ranks; ++k) {
    CHECK_CUDA(
        cudaMemcpy(dSum[k]->ptr, groupSum.data(), r * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(
        cudaMemcpy(dTarget[k]->ptr, groupTarget.data(), r * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(crossEntropyLossCuda(args[k], dLoss.ptr, nullptr));
    CHECK_CUDA(crossEntropyBwdCuda(args[k], nullptr));
    // Every rank computes the same loss from the reduced statistics.
    expectClose(what + " loss on rank " + std::to_string(k), dLoss.download(), {wantLoss}, 1e-5f,
                1e-6f);
    std::vector<float> got = dlogits[k]->download(), want(slice);
    for (Index n = 0; n < rows; ++n)
      std::copy_n(dfull.begin() + n * fullVocab + k * vocab, vocab, want.begin() + n * vocab);
    expectClose(what + " dlogits on rank " + std::to_string(k), got, want, 1e-4f,
                1e-5f / float(rows));
  }
}

struct AdamWState {
  std::vector<float> master, m, v, param, grad;
  explicit AdamWState(size_t n, unsigned seed)
      : master(randomVector(n, seed)), m(randomVector(n, seed + 1, 0.1f)),
        v(randomVector(n, seed + 2, 0.01f)), param(randomVector(n, seed + 3)),
        grad(randomVector(n, seed + 4)) {
    for (float &x : v)
      x = std::fabs(x); // a second moment
  }
};

struct AdamWDevice {
  DeviceBuffer<float> master, m, v, param, grad;
  explicit AdamWDevice(const AdamWState &s)
      : master(s.master), m(s.m), v(s.v), param(s.param), grad(s.grad) {}
  void compare(const std::string &what, const AdamWState &want) const {
    expectClose(what + " m", m.download(), want.m, 1e-4f, 1e-6f);
    expectClose(what + " v", v.download(), want.v, 1e-4f, 1e-8f);
    expectClose(what + " master", master.download(), want.master, 1e-4f, 1e-5f);
    expectClose(what + " param", param.download(), want.param, 1e-4f, 1e-5f);
  }
};

AdamWArgs hyper(float *master, float *m, float *v, float *param, const float *grad, Index n,
                int step) {
  return {master, m, v, param, grad, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step};
}

/// Three steps in a row on one tensor.
void checkAdamW(size_t n, unsigned seed) {
  AdamWState s(n, seed);
  AdamWDevice d(s);
  for (int step = 1; step <= 3; ++step) {
    adamWRef(hyper(s.master.data(), s.m.data(), s.v.data(), s.param.data(), s.grad.data(), Index(n),
                   step));
    CHECK_CUDA(adamWCuda(
        hyper(d.master.ptr, d.m.ptr, d.v.ptr, d.param.ptr, d.grad.ptr, Index(n), step), nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    d.compare("adamw n=" + std::to_string(n) + " step " + std::to_string(step), s);
  }
}

/// Several tensors of assorted sizes in one launch; an empty one has null
/// pointers, which the kernel must not touch.
void checkAdamWMultiTensor(const std::vector<size_t> &sizes, unsigned seed) {
  std::vector<AdamWState> states;
  std::vector<std::unique_ptr<AdamWDevice>> devices;
  for (size_t k = 0; k < sizes.size(); ++k) {
    states.emplace_back(sizes[k], seed + 10 * unsigned(k));
    devices.push_back(sizes[k] ? std::make_unique<AdamWDevice>(states.back()) : nullptr);
  }
  std::string what = "adamw multi-tensor (" + std::to_string(sizes.size()) + " tensors)";
  for (int step = 4; step <= 5; ++step) {
    AdamWMultiTensorArgs multi{};
    AdamWArgs shared = hyper(nullptr, nullptr, nullptr, nullptr, nullptr, 0, step);
    multi.count = int(sizes.size());
    multi.lr = shared.lr;
    multi.beta1 = shared.beta1;
    multi.beta2 = shared.beta2;
    multi.eps = shared.eps;
    multi.weightDecay = shared.weightDecay;
    multi.gradScale = shared.gradScale;
    multi.step = step;
    for (size_t k = 0; k < sizes.size(); ++k) {
      multi.n[k] = Index(sizes[k]);
      if (!devices[k])
        continue;
      AdamWState &s = states[k];
      AdamWDevice &d = *devices[k];
      adamWRef(hyper(s.master.data(), s.m.data(), s.v.data(), s.param.data(), s.grad.data(),
                     Index(sizes[k]), step));
      multi.master[k] = d.master.ptr;
      multi.m[k] = d.m.ptr;
      multi.v[k] = d.v.ptr;
      multi.param[k] = d.param.ptr;
      multi.grad[k] = d.grad.ptr;
    }
    CHECK_CUDA(adamWMultiTensorCuda(multi, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    for (size_t k = 0; k < sizes.size(); ++k)
      if (devices[k])
        devices[k]->compare(what + " tensor " + std::to_string(k) + " (n=" +
                                std::to_string(sizes[k]) + ") step " + std::to_string(step),
                            states[k]);
  }
}

} // namespace

int main() {
  requireGpu();
  checkPhases(1, 1, 1);
  checkPhases(7, 33, 11);
  checkPhases(64, 1000, 21);
  checkPhases(130, 1031, 31);
  checkPhases(33, 50257, 41);
  checkTensorParallel(5, 1, 2, 51);
  checkTensorParallel(48, 777, 2, 61);
  checkTensorParallel(20, 12563, 4, 71);

  // More than the 4096 x 256 threads of one grid: the grid-stride loop.
  for (size_t n : {size_t(1), size_t(33), size_t(1000), size_t(4097), size_t(3'000'011)})
    checkAdamW(n, unsigned(n));
  checkAdamWMultiTensor({1, 0, 1024, 1025, 4097, 33, 3'000'011, 7}, 301);
  checkAdamWMultiTensor(std::vector<size_t>(adamWMaxTensors, 100), 401); // the limit, exactly

  AdamWMultiTensorArgs tooMany{};
  tooMany.count = adamWMaxTensors + 1;
  tooMany.step = 1;
  if (adamWMultiTensorCuda(tooMany, nullptr) != cudaErrorInvalidValue) {
    std::printf("FAIL more than adamWMaxTensors tensors are not refused\n");
    ++failures();
  }
  CrossEntropyArgs bad{};
  bad.rows = -1;
  if (crossEntropyMaxCuda(bad, nullptr) != cudaErrorInvalidValue) {
    std::printf("FAIL negative rows are not refused\n");
    ++failures();
  }
  return finish();
}
