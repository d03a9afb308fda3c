//===- AttentionCudnnTest.cu - bf16 attention on cuDNN vs the reference ---===//
/// Forward (out, lse) and backward (dq, dk, dv) of attentionFwdCudnn /
/// attentionBwdCudnn against attentionFwdRef / attentionBwdRef, on inputs
/// rounded to bf16 first so both sides see the same numbers: batch 2,
/// H/KV 4/4, 4/2 (GQA) and 4/1 (MQA), head dims 64 and 128, separate and
/// fused-qkv layouts (q, k, v pointers into one [B, T, (H + 2 KV) D] buffer,
/// gradients into one dqkv buffer), sequence lengths 17, 64 and 200 (17 and
/// 200 are not multiples of cuDNN's 64- and 128-row tiles), causal, and two
/// non-causal. The backward is given the reference's out (rounded to
/// bf16, the type cuDNN reads) and lse, and the reference backward the same
/// out, so it is checked on its own; it runs twice and must repeat bit for
/// bit (the context asks for cuDNN's deterministic algorithm); then the
/// non-deterministic algorithm is checked on the same inputs. Also: the
/// forward without lse, the argument checks, and that a refusal both
/// backward algorithms share keeps the context deterministic.
///
/// Exits 77 (skipped) without a GPU, in a build without cuDNN, or when cuDNN
/// refuses the first (plainest) configuration on this device, saying why.
/// A later configuration that cuDNN refuses is reported as unsupported and
/// not failed: the caller then runs the fp32 kernels, which
/// AttentionKernelsTest checks.
///
/// Tolerances. The reference is fp32 on the same bf16-rounded inputs, so the
/// differences are cuDNN's own bf16 roundings: each output once (relative
/// 2^-9), and inside the kernels the probabilities P (before P·V and Pᵀ·dO)
/// and dS (before dS·K and dSᵀ·Q), which tensor cores take in bf16: each term
/// of those sums is off by up to 2^-8 relative, so a sum is off by about
/// 2^-8 of the sum of its terms' magnitudes, which cancellation can make
/// large next to the sum itself. Hence a relative bound of 2e-2 plus an
/// absolute one of 2e-2 times the root mean square of the expected tensor
/// (the scale of the sums' terms), a few times what these roundings give
/// and far below what a wrong mask, scale, head mapping or layout gives
/// (errors of order 1 relative); dv's elements also get 2^-7 of their own
/// sum of magnitudes (magnitudeBound), large for causal attention's early
/// keys. lse involves no bf16 rounding (fp32 scores
/// of bf16 inputs, fp32 softmax) and is held to 1e-3.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/attention/Attention.h"
#include "stdlib/kernels/attention/AttentionCudnn.h"
#include "tests/gpu/AttentionLayout.h"
#include "tests/gpu/GpuTest.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_bf16.h>

using namespace mist::kernels;
using namespace mist::gputest;

namespace {

using bf16 = __nv_bfloat16;

/// dv's sums P^T dO take P in bf16: each term off by up to 2^-8 of its
/// magnitude, so an element is off by up to 2^-8 of sum_i P |dO| (twice that
/// allowed). Early keys of causal attention collect large probabilities from
/// every later query, of every head of a kv group: there that sum is many
/// times the tensor's rms, and the rms bound alone failed a few elements
/// (both cuDNN algorithms agreeing to the bit; H200, cuDNN 9.19).
constexpr float magnitudeBound = 0x1p-7f;

/// expectClose with the absolute bound scaled by the expected tensor's size,
/// plus, where given, a per-element bound from the sums' magnitudes (see the
/// tolerances in the file comment).
void expectCloseBf16(const std::string &what, const std::vector<bf16> &got,
                     const std::vector<float> &want, const std::vector<float> &magnitude = {}) {
  double squares = 0;
  for (float x : want)
    squares += double(x) * x;
  const float rms = want.empty() ? 0.f : float(std::sqrt(squares / double(want.size())));
  const std::vector<float> gotF = toFloat(got);
  bool ok = gotF.size() == want.size();
  size_t out = 0, first = 0, last = 0, worst = 0;
  double worstExcess = -1;
  for (size_t i = 0; ok && i < want.size(); ++i) {
    const float bound = 2e-2f * rms + 2e-2f * std::fabs(want[i]) +
                        (magnitude.empty() ? 0.f : magnitudeBound * magnitude[i]);
    double excess = std::fabs(double(gotF[i]) - want[i]) - bound;
    if (excess != excess) // NaN: out
      excess = INFINITY;
    if (excess > 0) {
      first = out++ == 0 ? i : first;
      last = i;
    }
    if (excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (!ok) {
    std::printf("FAIL %s: %zu values, expected %zu\n", what.c_str(), gotF.size(), want.size());
    ++failures();
  } else if (out > 0) {
    // How many are out and where the first and last sit: a pattern (a tail
    // tile, one head) says more than the worst element alone.
    std::printf("FAIL %s: %zu of %zu elements out (first %zu, last %zu); element %zu is %g, "
                "expected %g\n",
                what.c_str(), out, want.size(), first, last, worst, double(gotF[worst]),
                double(want[worst]));
    ++failures();
  } else {
    std::printf("ok   %s (%zu values)\n", what.c_str(), want.size());
  }
}

bool sameBits(const std::vector<bf16> &a, const std::vector<bf16> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

enum class Outcome { Checked, Unsupported };

Outcome check(const Config &c, AttentionCudnnContext &ctx) {
  const Layout l = layoutOf(c);
  const std::string tag = name(c);
  const size_t outSize = size_t(c.batch * c.seq * c.heads * c.headDim),
               lseSize = size_t(c.batch * c.heads * c.seq);
  unsigned seed = unsigned(c.batch * 1000 + c.seq * 10 + c.heads * 3 + c.kvHeads + c.headDim);
  // Separate: buffers 0 (q), 1 (k), 2 (v). Fused: buffer 0 holds all three.
  std::vector<std::vector<float>> in(c.fused ? 1 : 3);
  in[0] = roundedToBf16(randomVector(l.qSize, seed));
  if (!c.fused) {
    in[1] = roundedToBf16(randomVector(l.kvSize, seed + 1));
    in[2] = roundedToBf16(randomVector(l.kvSize, seed + 2));
  }
  const auto dout = roundedToBf16(randomVector(outSize, seed + 3));
  const std::vector<float> &kHost = in[c.fused ? 0 : 1], &vHost = in[c.fused ? 0 : 2];

  // Reference forward, then the reference backward on out rounded to bf16.
  std::vector<float> out(outSize), lse(lseSize);
  std::vector<std::vector<float>> grad(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    grad[i].assign(in[i].size(), 0.f);
  std::vector<float> &dkHost = grad[c.fused ? 0 : 1], &dvHost = grad[c.fused ? 0 : 2];
  AttentionArgs ref{out.data(),
                    lse.data(),
                    in[0].data() + l.qOffset,
                    kHost.data() + l.kOffset,
                    vHost.data() + l.vOffset,
                    grad[0].data() + l.qOffset,
                    dkHost.data() + l.kOffset,
                    dvHost.data() + l.vOffset,
                    dout.data(),
                    c.batch,
                    c.seq,
                    c.heads,
                    c.kvHeads,
                    c.headDim,
                    l.qStride,
                    l.kvStride,
                    c.causal};
  attentionFwdRef(ref);
  const std::vector<float> outRounded = roundedToBf16(out);
  ref.out = const_cast<float *>(outRounded.data());
  attentionBwdRef(ref);
  // sum_i P |dO| per element of dv (the reference's dv on |dO|), zero
  // elsewhere: the per-element bound of dv's sums (magnitudeBound).
  std::vector<std::vector<float>> magnitude(in.size());
  {
    std::vector<std::vector<float>> absGrad(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      absGrad[i].assign(in[i].size(), 0.f);
    std::vector<float> absDout(dout.size());
    for (size_t i = 0; i < dout.size(); ++i)
      absDout[i] = std::fabs(dout[i]);
    AttentionArgs absRef = ref;
    absRef.dq = absGrad[0].data() + l.qOffset;
    absRef.dk = absGrad[c.fused ? 0 : 1].data() + l.kOffset;
    absRef.dv = absGrad[c.fused ? 0 : 2].data() + l.vOffset;
    absRef.dout = absDout.data();
    attentionBwdRef(absRef);
    const size_t vTensor = c.fused ? 0 : 2;
    for (size_t i = 0; i < in.size(); ++i)
      magnitude[i].assign(in[i].size(), 0.f);
    // dv's elements: columns [vOffset, vOffset + KV D) of each kvStride row.
    for (Index row = 0; row < c.batch * c.seq; ++row)
      for (Index col = 0; col < c.kvHeads * c.headDim; ++col) {
        const size_t at = size_t(row * l.kvStride + l.vOffset + col);
        magnitude[vTensor][at] = absGrad[vTensor][at];
      }
  }

  // GPU buffers, zero-initialised (DeviceBuffer).
  std::vector<DeviceBuffer<bf16> *> dIn, dGrad;
  for (size_t i = 0; i < in.size(); ++i) {
    dIn.push_back(new DeviceBuffer<bf16>(toBf16(in[i])));
    dGrad.push_back(new DeviceBuffer<bf16>(in[i].size()));
  }
  DeviceBuffer<bf16> dOut(outSize), dDout(toBf16(dout));
  DeviceBuffer<float> dLse(lseSize);
  const bf16 *dK = dIn[c.fused ? 0 : 1]->ptr, *dV = dIn[c.fused ? 0 : 2]->ptr;
  bf16 *dDk = dGrad[c.fused ? 0 : 1]->ptr, *dDv = dGrad[c.fused ? 0 : 2]->ptr;
  AttentionCudnnArgs args{dOut.ptr,        dLse.ptr,        dIn[0]->ptr + l.qOffset,
                          dK + l.kOffset,  dV + l.vOffset,  dGrad[0]->ptr + l.qOffset,
                          dDk + l.kOffset, dDv + l.vOffset, dDout.ptr,
                          c.batch,         c.seq,           c.heads,
                          c.kvHeads,       c.headDim,       l.qStride,
                          l.kvStride,      c.causal};
  auto release = [&] {
    for (size_t i = 0; i < in.size(); ++i) {
      delete dIn[i];
      delete dGrad[i];
    }
  };
  /// Ok: go on; Unsupported: report and stop; Failed: count a failure and stop.
  auto accept = [&](const char *what, const AttentionCudnnStatus &s) {
    if (s.ok())
      return true;
    if (s.unsupported()) {
      std::printf("unsupported %s %s: %s\n", tag.c_str(), what, s.message().c_str());
    } else {
      std::printf("FAIL %s %s: %s\n", tag.c_str(), what, s.message().c_str());
      ++failures();
    }
    return false;
  };

  AttentionCudnnStatus s = attentionFwdCudnn(args, nullptr, &ctx);
  if (!accept("forward", s)) {
    release();
    return s.unsupported() ? Outcome::Unsupported : Outcome::Checked;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  expectCloseBf16(tag + " out", dOut.download(), out);
  expectClose(tag + " lse", dLse.download(), lse, 1e-3f, 1e-3f);

  // The backward on the reference's out (bf16) and lse.
  CHECK_CUDA(cudaMemcpy(dOut.ptr, toBf16(outRounded).data(), outSize * sizeof(bf16),
                        cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dLse.ptr, lse.data(), lseSize * sizeof(float), cudaMemcpyHostToDevice));
  s = attentionBwdCudnn(args, nullptr, &ctx);
  if (!accept("backward", s)) {
    release();
    return s.unsupported() ? Outcome::Unsupported : Outcome::Checked;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<std::vector<bf16>> first;
  for (size_t i = 0; i < in.size(); ++i)
    first.push_back(dGrad[i]->download());
  if (c.fused) {
    expectCloseBf16(tag + " dqkv", first[0], grad[0], magnitude[0]);
  } else {
    expectCloseBf16(tag + " dq", first[0], grad[0]);
    expectCloseBf16(tag + " dk", first[1], grad[1]);
    expectCloseBf16(tag + " dv", first[2], grad[2], magnitude[2]);
  }

  // Deterministic: a second backward gives the same bits.
  s = attentionBwdCudnn(args, nullptr, &ctx);
  if (accept("second backward", s)) {
    CHECK_CUDA(cudaDeviceSynchronize());
    bool same = true;
    for (size_t i = 0; i < in.size(); ++i)
      same = same && sameBits(first[i], dGrad[i]->download());
    std::printf("%s %s backward repeats bit for bit\n", same ? "ok  " : "FAIL", tag.c_str());
    if (!same)
      ++failures();
  }

  // The non-deterministic algorithm on the same inputs: the trainer falls
  // back to it where the deterministic one is refused or out of memory.
  ctx.setDeterministicBackward(false);
  for (size_t i = 0; i < in.size(); ++i)
    CHECK_CUDA(cudaMemset(dGrad[i]->ptr, 0, in[i].size() * sizeof(bf16)));
  s = attentionBwdCudnn(args, nullptr, &ctx);
  ctx.setDeterministicBackward(true);
  if (accept("non-deterministic backward", s)) {
    CHECK_CUDA(cudaDeviceSynchronize());
    const std::string nd = tag + " non-deterministic";
    if (c.fused) {
      expectCloseBf16(nd + " dqkv", dGrad[0]->download(), grad[0], magnitude[0]);
    } else {
      expectCloseBf16(nd + " dq", dGrad[0]->download(), grad[0]);
      expectCloseBf16(nd + " dk", dGrad[1]->download(), grad[1]);
      expectCloseBf16(nd + " dv", dGrad[2]->download(), grad[2], magnitude[2]);
    }
  }
  release();
  return Outcome::Checked;
}

/// Inference: no lse, the same out.
void checkWithoutLse(AttentionCudnnContext &ctx) {
  const Config c{2, 100, 4, 2, 64, false, true};
  const Layout l = layoutOf(c);
  const size_t outSize = size_t(c.batch * c.seq * c.heads * c.headDim);
  auto q = roundedToBf16(randomVector(l.qSize, 7)), k = roundedToBf16(randomVector(l.kvSize, 8)),
       v = roundedToBf16(randomVector(l.kvSize, 9));
  std::vector<float> out(outSize), lse(size_t(c.batch * c.heads * c.seq));
  AttentionArgs ref{out.data(), lse.data(), q.data(),  k.data(),   v.data(), nullptr,
                    nullptr,    nullptr,    nullptr,   c.batch,    c.seq,    c.heads,
                    c.kvHeads,  c.headDim,  l.qStride, l.kvStride, c.causal};
  attentionFwdRef(ref);
  DeviceBuffer<bf16> dQ(toBf16(q)), dK(toBf16(k)), dV(toBf16(v)), dOut(outSize);
  AttentionCudnnArgs args{dOut.ptr,  nullptr,   dQ.ptr,    dK.ptr,     dV.ptr,  nullptr,
                          nullptr,   nullptr,   nullptr,   c.batch,    c.seq,   c.heads,
                          c.kvHeads, c.headDim, l.qStride, l.kvStride, c.causal};
  AttentionCudnnStatus s = attentionFwdCudnn(args, nullptr, &ctx);
  if (s.unsupported()) {
    std::printf("unsupported forward without lse: %s\n", s.message().c_str());
    return;
  }
  if (!s.ok()) {
    std::printf("FAIL forward without lse: %s\n", s.message().c_str());
    ++failures();
    return;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  expectCloseBf16(name(c) + " out without lse", dOut.download(), out);
}

/// Invalid arguments are Failed, a misaligned operand Unsupported, before any launch.
void checkRejected(AttentionCudnnContext &ctx) {
  DeviceBuffer<bf16> buffer(size_t(2 * 64 * 4 * 64 * 3));
  DeviceBuffer<float> lse(size_t(2 * 4 * 64));
  bf16 *p = buffer.ptr;
  const AttentionCudnnArgs good{p, lse.ptr, p, p, p, p, p, p, p, 2, 64, 4, 4, 64, 256, 256, true};
  bool ok = true;
  auto expect = [&](const char *what, const AttentionCudnnStatus &s, AttentionCudnnCode code) {
    bool right = s.code() == code;
    std::printf("%s %s (%s)\n", right ? "ok  " : "FAIL", what, s.message().c_str());
    ok = ok && right;
  };
  AttentionCudnnArgs a = good;
  a.heads = 3, a.kvHeads = 2;
  expect("H % KV != 0 rejected", attentionFwdCudnn(a, nullptr, &ctx), AttentionCudnnCode::Failed);
  a = good;
  a.batch = -1;
  expect("negative batch rejected", attentionFwdCudnn(a, nullptr, &ctx),
         AttentionCudnnCode::Failed);
  a = good;
  a.q = nullptr;
  expect("null q rejected", attentionFwdCudnn(a, nullptr, &ctx), AttentionCudnnCode::Failed);
  a = good;
  a.dout = nullptr;
  expect("null dout rejected", attentionBwdCudnn(a, nullptr, &ctx), AttentionCudnnCode::Failed);
  a = good;
  a.qStride = 128;
  expect("qStride < H D rejected", attentionFwdCudnn(a, nullptr, &ctx), AttentionCudnnCode::Failed);
  a = good;
  a.k = p + 1; // 2 bytes past a 16-byte boundary
  expect("misaligned k unsupported", attentionFwdCudnn(a, nullptr, &ctx),
         AttentionCudnnCode::Unsupported);
  a = good;
  a.seq = 0;
  expect("empty sequence is a no-op", attentionFwdCudnn(a, nullptr, &ctx), AttentionCudnnCode::Ok);
  // A refusal both algorithms share leaves the context asking for the
  // deterministic backward (it once gave determinism up for any refusal).
  a = good;
  a.dq = p + 1;
  std::string why;
  const bool wasDeterministic = ctx.deterministicBackward();
  expect("misaligned dq unsupported by either backward",
         attentionBwdCudnnAnyAlgorithm(a, nullptr, ctx, why), AttentionCudnnCode::Unsupported);
  const bool kept = ctx.deterministicBackward() == wasDeterministic && why.empty();
  std::printf("%s the context's determinism kept after a shared refusal\n", kept ? "ok  " : "FAIL");
  ok = ok && kept;
  if (!ok)
    ++failures();
}

} // namespace

int main() {
  requireGpu();
  if (!attentionCudnnBuilt()) {
    std::printf("built without cuDNN (CMake found no cuDNN or no cuDNN frontend headers); "
                "skipped\n");
    return 77;
  }
  AttentionCudnnContext ctx;
  // The plainest configuration first: if cuDNN refuses it here, nothing runs on cuDNN.
  {
    const Config probe{1, 64, 4, 4, 64, false, true};
    const Layout l = layoutOf(probe);
    DeviceBuffer<bf16> q(l.qSize), k(l.kvSize), v(l.kvSize), out(l.qSize);
    DeviceBuffer<float> lse(size_t(probe.heads * probe.seq));
    AttentionCudnnArgs a{out.ptr,    lse.ptr,     q.ptr,         k.ptr,         v.ptr,
                         nullptr,    nullptr,     nullptr,       nullptr,       probe.batch,
                         probe.seq,  probe.heads, probe.kvHeads, probe.headDim, l.qStride,
                         l.kvStride, true};
    AttentionCudnnStatus s = attentionFwdCudnn(a, nullptr, &ctx);
    if (s.unsupported()) {
      std::printf("cuDNN refuses plain causal attention on this device (%s); skipped\n",
                  s.message().c_str());
      return 77;
    }
    if (!s.ok()) {
      std::printf("FAIL probe forward: %s\n", s.message().c_str());
      return 1;
    }
    CHECK_CUDA(cudaDeviceSynchronize());
  }

  const auto start = std::chrono::steady_clock::now();
  int checked = 0, unsupportedCount = 0;
  auto run = [&](const Config &c) {
    (check(c, ctx) == Outcome::Checked ? checked : unsupportedCount) += 1;
  };
  // Every (head dim, group, layout) once, the sequence length rotating so that
  // each group meets every length, causal; then two non-causal. Each
  // configuration is a new cuDNN graph (built once, some seconds at most), so
  // the list is kept short.
  const std::pair<Index, Index> groups[] = {{4, 4}, {4, 2}, {4, 1}};
  const Index seqs[] = {17, 64, 200};
  int i = 0;
  for (Index headDim : {64, 128}) {
    for (auto [heads, kvHeads] : groups)
      for (bool fused : {false, true})
        run({2, seqs[i++ % 3], heads, kvHeads, headDim, fused, true});
    ++i;
  }
  for (Index headDim : {64, 128})
    run({2, 100, 4, 2, headDim, headDim == 128, false});
  checkWithoutLse(ctx);
  checkRejected(ctx);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d configurations checked, %d unsupported by cuDNN here (those fall back to the "
              "fp32 kernels), %.1f s\n",
              checked, unsupportedCount, seconds);
  return finish();
}
