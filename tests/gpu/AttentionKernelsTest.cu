//===- AttentionKernelsTest.cu - Flash attention vs the CPU reference -----===//
/// Forward (out, lse) and backward (dq, dk, dv) over batch 1 and 2, sequence
/// lengths 1, 17, 64 and 200 (partial tiles, one tile, several), H/KV 4/4,
/// 4/2 and 4/1 (MQA), head dims 64 and 128, separate and fused-qkv layouts,
/// causal or not. The backward is given the reference's out and lse so that
/// it is checked on its own.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/attention/AttentionCuda.h"
#include "tests/gpu/AttentionLayout.h"
#include "tests/gpu/GpuTest.h"

using namespace mist::kernels;
using namespace mist::gputest;

namespace {

void check(const Config &c) {
  const Layout l = layoutOf(c);
  const size_t outSize = size_t(c.batch * c.seq * c.heads * c.headDim),
               lseSize = size_t(c.batch * c.heads * c.seq);
  unsigned seed = unsigned(c.batch * 1000 + c.seq * 10 + c.heads * 3 + c.kvHeads + c.headDim);
  // Separate: buffers 0 (q), 1 (k), 2 (v). Fused: buffer 0 holds all three.
  std::vector<std::vector<float>> in(c.fused ? 1 : 3);
  in[0] = randomVector(l.qSize, seed);
  if (!c.fused) {
    in[1] = randomVector(l.kvSize, seed + 1);
    in[2] = randomVector(l.kvSize, seed + 2);
  }
  auto dout = randomVector(outSize, seed + 3);
  const std::vector<float> &kHost = in[c.fused ? 0 : 1], &vHost = in[c.fused ? 0 : 2];

  // Reference.
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
  attentionBwdRef(ref);

  // GPU.
  std::vector<DeviceBuffer<float> *> dIn, dGrad;
  for (size_t i = 0; i < in.size(); ++i) {
    dIn.push_back(new DeviceBuffer<float>(in[i]));
    dGrad.push_back(new DeviceBuffer<float>(in[i].size()));
  }
  DeviceBuffer<float> dOut(outSize), dLse(lseSize), dDout(dout);
  const float *dK = dIn[c.fused ? 0 : 1]->ptr, *dV = dIn[c.fused ? 0 : 2]->ptr;
  float *dDk = dGrad[c.fused ? 0 : 1]->ptr, *dDv = dGrad[c.fused ? 0 : 2]->ptr;
  AttentionArgs args = ref;
  args.out = dOut.ptr;
  args.lse = dLse.ptr;
  args.q = dIn[0]->ptr + l.qOffset;
  args.k = dK + l.kOffset;
  args.v = dV + l.vOffset;
  args.dq = dGrad[0]->ptr + l.qOffset;
  args.dk = dDk + l.kOffset;
  args.dv = dDv + l.vOffset;
  args.dout = dDout.ptr;

  const std::string tag = name(c);
  cudaError_t rc = attentionFwdCuda(args, nullptr);
  CHECK_CUDA(rc);
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(tag + " out", dOut.download(), out, 1e-3f, 1e-4f);
  expectClose(tag + " lse", dLse.download(), lse, 1e-4f, 1e-4f);

  // The backward on the reference's out and lse.
  CHECK_CUDA(cudaMemcpy(dOut.ptr, out.data(), outSize * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dLse.ptr, lse.data(), lseSize * sizeof(float), cudaMemcpyHostToDevice));
  rc = attentionBwdCuda(args, nullptr);
  CHECK_CUDA(rc);
  CHECK_CUDA(cudaDeviceSynchronize());
  if (c.fused) {
    expectClose(tag + " dqkv", dGrad[0]->download(), grad[0], 1e-3f, 1e-4f);
  } else {
    expectClose(tag + " dq", dGrad[0]->download(), grad[0], 1e-3f, 1e-4f);
    expectClose(tag + " dk", dGrad[1]->download(), grad[1], 1e-3f, 1e-4f);
    expectClose(tag + " dv", dGrad[2]->download(), grad[2], 1e-3f, 1e-4f);
  }
  for (size_t i = 0; i < in.size(); ++i) {
    delete dIn[i];
    delete dGrad[i];
  }
}

/// Unsupported shapes are refused before any launch.
void checkRejected() {
  DeviceBuffer<float> buffer(size_t(4 * 96 * 3));
  AttentionArgs a{buffer.ptr, buffer.ptr, buffer.ptr, buffer.ptr, buffer.ptr, nullptr,
                  nullptr,    nullptr,    nullptr,    1,          4,          1,
                  1,          96,         96,         96,         true};
  bool ok = attentionFwdCuda(a, nullptr) == cudaErrorInvalidValue;
  a.headDim = 64, a.heads = 3, a.kvHeads = 2, a.qStride = 192, a.kvStride = 128;
  ok = ok && attentionFwdCuda(a, nullptr) == cudaErrorInvalidValue;
  std::printf("%s unsupported head dim and H %% KV != 0 rejected\n", ok ? "ok  " : "FAIL");
  if (!ok)
    ++failures();
}

} // namespace

int main() {
  requireGpu();
  const std::pair<Index, Index> groups[] = {{4, 4}, {4, 2}, {4, 1}};
  for (Index headDim : {64, 128})
    for (Index seq : {1, 17, 64, 200})
      for (auto [heads, kvHeads] : groups)
        for (Index batch : {1, 2})
          for (bool fused : {false, true})
            for (bool causal : {true, false})
              check({batch, seq, heads, kvHeads, headDim, fused, causal});
  checkRejected();
  return finish();
}
