//===- CpuOpTimer.cpp - Time one IR op at one shape with the CPU ops -------===//
#include "tools/profiler/CpuOpTimer.h"

#include "runtime/ops/Ops.h"
#include "tools/profiler/Median.h"
#include "tools/profiler/OpSetup.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mist::profiler {

namespace ops = mist::rt::ops;
using ops::Index;

double medianHostSeconds(int warmup, int repeats, const std::function<void()> &run,
                         const std::function<void()> &before) {
  for (int i = 0; i < warmup; ++i) {
    if (before)
      before();
    run();
  }
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    if (before)
      before();
    auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(times);
}

size_t cacheEvictionBytes() {
  static const size_t bytes = [] {
    // index*/size reads "32768K" (or "1M"); the largest cache is the last level.
    size_t largest = 0;
    std::error_code ec;
    for (const auto &entry :
         std::filesystem::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
      if (entry.path().filename().string().rfind("index", 0) != 0)
        continue;
      std::ifstream in(entry.path() / "size");
      size_t value = 0;
      char unit = 0;
      if (!(in >> value))
        continue;
      in >> unit;
      const size_t scale = unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
      largest = std::max(largest, value * scale);
    }
    return largest > 0 ? 2 * largest : size_t(64) << 20;
  }();
  return bytes;
}

namespace {

using mist::rt::DType;
using mist::rt::Tensor;

/// Evicts the caches: writes every cache line of a buffer twice the size of
/// the largest cache, so that what an op reads next comes from memory.
void evictCaches() {
  static std::vector<char> buffer(cacheEvictionBytes(), 1);
  volatile char *b = buffer.data();
  for (size_t i = 0; i < buffer.size(); i += 64)
    b[i] = char(b[i] + 1);
}

volatile char readSink; ///< what readIntoCaches reads goes here, so that it is read

/// Reads every cache line of [p, p + bytes), bringing it into the caches.
void readIntoCaches(const void *p, size_t bytes) {
  const volatile char *b = static_cast<const char *>(p);
  char sum = 0;
  for (size_t i = 0; i < bytes; i += 64)
    sum = char(sum + b[i]);
  readSink = sum;
}

/// The host buffers of one measurement, aligned as the CPU ranks' device
/// memory is (64 bytes: runtime/device/HostDevice.cpp), filled with random
/// values and freed together. `act` is the trainer's weights and
/// activations (the plan's dtype); `floats` the fp32 ones (statistics, the
/// loss), `grads` the weight gradients (fp32, the default grad_dtype).
class HostArena {
public:
  HostArena(uint32_t seed, DType dtype) : rng(seed), dtype(dtype) {}
  float *floats(int64_t n) { return static_cast<float *>(random(n, DType::F32).data); }
  Tensor act(int64_t n) { return random(n, dtype); }
  Tensor grads(int64_t n) { return random(n, DType::F32); }
  /// Marks the buffer at `p` (one this arena allocated) as one the step
  /// finds in the caches when the op begins: written by the ops just before.
  void cached(const void *p) {
    for (const auto &[at, bytes] : sizes)
      if (at == p)
        inCaches.push_back({at, bytes});
  }
  /// Puts the caches as the step leaves them for the op: evicted, then the
  /// buffers marked `cached` read back.
  void prepareCaches() const {
    evictCaches();
    for (const auto &[at, bytes] : inCaches)
      readIntoCaches(at, bytes);
    // A bf16 op's fp32 staging copies (runtime/ops/Fp32Staging.h) take the
    // memory the copies of the op before it just freed, which is in the
    // caches: so is the free memory the allocator hands out next.
    if (stagedBytes > 0) {
      void *p = std::aligned_alloc(64, stagedBytes);
      if (p) {
        volatile char *b = static_cast<char *>(p);
        for (size_t i = 0; i < stagedBytes; i += 64)
          b[i] = 0;
        std::free(p);
      }
    }
  }
  int32_t *ints(int64_t n, int64_t bound) {
    need(n > 0 && bound > 0, "an id buffer needs ids and a bound");
    int32_t *b = static_cast<int32_t *>(allocate(static_cast<size_t>(n) * sizeof(int32_t)));
    std::uniform_int_distribution<int64_t> u(0, bound - 1);
    for (int64_t i = 0; i < n; ++i)
      b[i] = static_cast<int32_t>(u(rng));
    return b;
  }

private:
  Tensor random(int64_t n, DType type) {
    need(n > 0 && n < (int64_t(1) << 32), "a buffer of " + std::to_string(n) + " elements");
    if (type != DType::F32) // staged in fp32 for the call, 64-byte aligned
      stagedBytes += (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    void *b = allocate(static_cast<size_t>(n) * mist::rt::bytesOf(type));
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int64_t i = 0; i < n; ++i)
      if (type == DType::F32)
        static_cast<float *>(b)[i] = u(rng);
      else
        static_cast<uint16_t *>(b)[i] = mist::rt::toBf16(u(rng));
    return {b, type};
  }
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  void *allocate(size_t bytes) {
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
      throw std::bad_alloc();
    buffers.emplace_back(p);
    sizes.push_back({p, bytes});
    return p;
  }
  std::mt19937 rng;
  DType dtype;
  std::vector<std::unique_ptr<void, Free>> buffers;
  std::vector<std::pair<const void *, size_t>> sizes, inCaches;
  size_t stagedBytes = 0; ///< fp32 copies of the bf16 buffers, all at once
};

/// Sets up one op and returns the call to time.
class CpuSetup final : public OpSetup {
public:
  CpuSetup(const ShapeEntry &e, HostArena &mem) : OpSetup(e), mem(mem) {}

private:
  Call gemm(bool lmHead) override {
    operands(2, lmHead ? 2 : 3);
    need(ops[1].size() == 2, "the weight must have rank 2");
    const int64_t in = last(0), rows = rowsOf(0);
    // linear's weight is [in, out]; lm_head's table [vocab, channels].
    const int64_t outF = lmHead ? ops[1][0] : ops[1][1];
    need((lmHead ? ops[1][1] : ops[1][0]) == in, "the weight does not match the input");
    Tensor y = mem.act(rows * outF), x = mem.act(rows * in), w = mem.act(in * outF);
    mem.cached(x.data); // written by the op before (a norm, attention, the activation)
    if (lmHead)
      return [=] { ops::lmHead(y, x, w, rows, in, outF); };
    Tensor bias = ops.size() == 3 ? mem.act(outF) : nullptr;
    return [=] { ops::linear(y, x, w, bias, rows, in, outF); };
  }

  Call gemmGrad(bool lmHead) override {
    operands(3, 3);
    need(ops[2].size() == 2, "the weight must have rank 2");
    const int64_t in = last(1), rows = rowsOf(1), outF = last(0);
    need(rowsOf(0) == rows, "dy and x differ in rows");
    Tensor dy = mem.act(rows * outF), x = mem.act(rows * in), w = mem.act(in * outF),
           dx = mem.act(rows * in), dw = mem.grads(in * outF);
    mem.cached(dy.data); // the incoming gradient; x and w are the forward's
    if (lmHead)
      return [=] { ops::lmHeadGrad(dx, dw, dy, x, w, rows, in, outF); };
    Tensor db = e.word("bias", "true") == "true" ? mem.grads(outF) : nullptr;
    return [=] { ops::linearGrad(dx, dw, db, dy, x, w, rows, in, outF); };
  }

  Call attention(bool grad) override {
    const bool fused = ops.size() == (grad ? 4u : 1u);
    need(fused || ops.size() == (grad ? 6u : 3u), "unexpected operand count for attention");
    need(e.number("dropout", 0) == 0, "attention dropout: the CPU op has none");
    const size_t q = grad ? 1 : 0;
    need(ops[q].size() == 3, "q must be [batch, seq, width]");
    ops::AttentionShape s{ops[q][0],
                          ops[q][1],
                          sizeAttr("heads"),
                          sizeAttr("kv_heads"),
                          sizeAttr("head_dim"),
                          e.word("causal", "true") == "true"};
    need(s.heads % s.kvHeads == 0, "heads must be a multiple of kv_heads");
    const int64_t W = ops[q][2], tokens = s.batch * s.seq, qWidth = s.heads * s.headDim,
                  kvWidth = s.kvHeads * s.headDim;
    need(fused ? W == qWidth + 2 * kvWidth : W == qWidth,
         "the operand widths do not match the heads");
    const int64_t qStride = fused ? W : qWidth, kvStride = fused ? W : kvWidth;
    // q, k and v: one fused buffer at offsets 0, H*D, (H+KV)*D, or three.
    auto qkv = [&](Tensor &qp, Tensor &kp, Tensor &vp) {
      if (fused) {
        qp = mem.act(tokens * W);
        kp = qp + qWidth;
        vp = kp + kvWidth;
      } else {
        qp = mem.act(tokens * qWidth);
        kp = mem.act(tokens * kvWidth);
        vp = mem.act(tokens * kvWidth);
      }
    };
    Tensor qp, kp, vp;
    qkv(qp, kp, vp);
    if (!grad) // q, k and v, just projected
      for (Tensor t : {qp, kp, vp})
        mem.cached(t.data);
    Tensor out = mem.act(tokens * qWidth);
    float *lse = mem.floats(s.batch * s.heads * s.seq);
    if (!grad)
      return [=] { ops::attention(out, lse, qp, kp, vp, qStride, kvStride, s); };
    ops::attention(out, lse, qp, kp, vp, qStride, kvStride, s); // out and lse for the backward
    Tensor dout = mem.act(tokens * qWidth), dq, dk, dv;
    mem.cached(dout.data);
    qkv(dq, dk, dv);
    return
        [=] { ops::attentionGrad(dq, dk, dv, dout, qp, kp, vp, out, lse, qStride, kvStride, s); };
  }

  Call layerNorm(bool grad) override {
    operands(grad ? 4 : 2, grad ? 5 : 3);
    const size_t xi = grad ? 1 : 0;
    const bool hasBias = ops.size() == (grad ? 5u : 3u);
    const int64_t rows = rowsOf(xi), C = last(xi);
    const float eps = static_cast<float>(e.number("eps", 1e-5));
    Tensor x = mem.act(rows * C), w = mem.act(C), b = hasBias ? mem.act(C) : nullptr,
           y = mem.act(rows * C);
    float *stats = mem.floats(2 * rows);
    if (!grad) {
      mem.cached(x.data);
      return [=] { ops::layerNorm(y, stats, x, w, b, rows, C, eps); };
    }
    ops::layerNorm(y, stats, x, w, b, rows, C, eps); // the statistics
    Tensor dy = mem.act(rows * C), dx = mem.act(rows * C), dw = mem.grads(C),
           db = hasBias ? mem.grads(C) : nullptr;
    mem.cached(dy.data);
    return [=] { ops::layerNormGrad(dx, dw, db, dy, x, w, stats, rows, C); };
  }

  Call rmsNorm(bool grad) override {
    operands(grad ? 4 : 2, grad ? 4 : 2);
    const size_t xi = grad ? 1 : 0;
    const int64_t rows = rowsOf(xi), C = last(xi);
    const float eps = static_cast<float>(e.number("eps", 1e-5));
    Tensor x = mem.act(rows * C), w = mem.act(C), y = mem.act(rows * C);
    float *stats = mem.floats(rows);
    if (!grad) {
      mem.cached(x.data);
      return [=] { ops::rmsNorm(y, stats, x, w, rows, C, eps); };
    }
    ops::rmsNorm(y, stats, x, w, rows, C, eps); // rstd
    Tensor dy = mem.act(rows * C), dx = mem.act(rows * C), dw = mem.grads(C);
    mem.cached(dy.data);
    return [=] { ops::rmsNormGrad(dx, dw, dy, x, w, stats, rows, C); };
  }

  Call rope(bool grad) override {
    operands(1, 1);
    need(ops[0].size() >= 3, "rope's input must be [batch, seq, ...]");
    const int64_t D = sizeAttr("head_dim");
    const int64_t B = ops[0][0], T = ops[0][1], width = elements(ops[0]) / (B * T);
    need(D > 0 && D % 2 == 0 && width % D == 0, "needs an even head_dim dividing the width");
    const float theta = static_cast<float>(e.number("theta", 10000));
    Tensor x = mem.act(elements(ops[0])), y = mem.act(elements(ops[0]));
    mem.cached(x.data); // q or k, just projected (backward: their gradient)
    if (grad)
      return [=] { ops::ropeGrad(y, x, B, T, width / D, D, theta, D); };
    return [=] { ops::rope(y, x, B, T, width / D, D, theta, D); };
  }

  Call elementwise(const std::string &op) override {
    const bool grad = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
    const bool binary = op == "mul" || op == "add" || op == "grad_add" || op == "mul_grad";
    const size_t want = (binary ? 2 : 1) + (grad ? 1 : 0);
    operands(want, want);
    const int64_t n = elements(ops[0]);
    for (const auto &o : ops)
      need(elements(o) == n, "the operands differ in size");
    Tensor a = mem.act(n), b = binary ? mem.act(n) : nullptr, out = mem.act(n);
    if (!grad) { // activations (for grad_add, gradients) the ops just before wrote
      mem.cached(a.data);
      mem.cached(b.data);
    }
    const bool exactGelu = e.word("approximate", "true") == "false";
    if (op == "gelu" && exactGelu)
      return [=] { ops::geluExact(out, a, n); };
    if (op == "gelu")
      return [=] { ops::gelu(out, a, n); };
    if (op == "silu")
      return [=] { ops::silu(out, a, n); };
    if (op == "mul")
      return [=] { ops::mul(out, a, b, n); };
    if (op == "add" || op == "grad_add")
      return [=] { ops::add(out, a, b, n); };
    Tensor dout = mem.act(n);
    mem.cached(dout.data); // the forward's input `a` comes from memory
    if (op == "gelu_grad" && exactGelu)
      return [=] { ops::geluExactGrad(out, dout, a, n); };
    if (op == "gelu_grad")
      return [=] { ops::geluGrad(out, dout, a, n); };
    if (op == "silu_grad")
      return [=] { ops::siluGrad(out, dout, a, n); };
    Tensor db = mem.act(n); // mul_grad
    return [=] { ops::mulGrad(out, db, dout, a, b, n); };
  }

  Call embedding(bool grad) override {
    operands(2, 2);
    if (!grad) { // ids [b, s], table [V, C]
      need(ops[1].size() == 2, "the table must have rank 2");
      const int64_t tokens = elements(ops[0]), V = ops[1][0], C = ops[1][1];
      int32_t *ids = mem.ints(tokens, V);
      mem.cached(ids); // just loaded
      Tensor table = mem.act(V * C), out = mem.act(tokens * C);
      return [=] { ops::embedding(out, ids, table, tokens, C, V, 0); };
    }
    // dy [b, s, C], ids [b, s]; the `rows` attribute is the vocabulary slice.
    const int64_t V = sizeAttr("rows");
    need(V > 0, "needs the rows attribute (the vocabulary)");
    const int64_t tokens = elements(ops[1]), C = last(0);
    need(elements(ops[0]) == tokens * C, "dy does not match the ids");
    int32_t *ids = mem.ints(tokens, V);
    Tensor dy = mem.act(tokens * C), dtable = mem.grads(V * C);
    mem.cached(dy.data);
    return [=] { ops::embeddingGrad(dtable, dy, ids, tokens, C, V, 0); };
  }

  Call positionEmbeddingGrad() override {
    operands(1, 1);
    need(ops[0].size() == 3, "dy must be [batch, seq, channels]");
    const int64_t B = ops[0][0], T = ops[0][1], C = ops[0][2];
    Tensor dy = mem.act(B * T * C), dtable = mem.grads(T * C);
    mem.cached(dy.data);
    return [=] { ops::positionEmbeddingGrad(dtable, dy, B * T, T, C, 0); };
  }

  Call crossEntropy(bool grad) override {
    operands(grad ? 4 : 2, grad ? 4 : 2);
    const size_t li = grad ? 1 : 0;
    const int64_t V = last(li), rows = rowsOf(li);
    // The logits, just written by the LM head; the backward too finds them
    // there: a last stage runs a micro-batch's loss backward right after its
    // forward.
    Tensor logits = mem.act(rows * V);
    mem.cached(logits.data);
    float *rowMax = mem.floats(rows), *sumExp = mem.floats(rows), *target = mem.floats(rows),
          *stats = mem.floats(2 * rows), *loss = mem.floats(1);
    int32_t *targets = mem.ints(rows, V);
    // The trainer's phases at tp = 1 (TpContext::crossEntropy).
    auto forward = [=] {
      ops::crossEntropyRowMax(rowMax, logits, rows, V);
      ops::crossEntropyRowSums(sumExp, target, logits, targets, rowMax, rows, V, 0);
      ops::crossEntropyFinish(loss, stats, rowMax, sumExp, target, rows);
    };
    if (!grad)
      return forward;
    forward(); // the statistics for the backward
    Tensor dlogits = mem.act(rows * V);
    float *dloss = mem.floats(1);
    *dloss = 1;
    return [=] { ops::crossEntropyGrad(dlogits, dloss, logits, targets, stats, rows, V, 0); };
  }

  HostArena &mem;
};

} // namespace

OpTime timeOpOnCpu(const ShapeEntry &e, int warmup, int repeats, DType dtype,
                   const std::function<void()> &sync) {
  OpTime t;
  try {
    // The reference kernels' speed depends on where their buffers fall in
    // the caches (the same call differs by 10-15% between allocations), so
    // the figure is the median over seven fresh sets of buffers (with three
    // a GPT's summed op times moved by +-3% from run to run, with seven by
    // about 1%).
    std::vector<double> placements;
    for (uint32_t seed = 1; seed <= 7; ++seed) {
      HostArena mem(seed, dtype);
      CpuSetup setup(e, mem);
      std::function<void()> run = setup.build();
      placements.push_back(medianHostSeconds(warmup, repeats, run, [&] {
        mem.prepareCaches();
        if (sync)
          sync();
      }));
    }
    t.seconds = median(placements);
    t.timed = t.seconds > 0;
    if (!t.timed)
      t.why = "measured no time";
  } catch (const NotTimed &n) {
    t.why = n.why;
  } catch (const std::bad_alloc &) {
    t.why = "out of host memory";
  }
  return t;
}

} // namespace mist::profiler
