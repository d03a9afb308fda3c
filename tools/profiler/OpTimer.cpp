//===- OpTimer.cpp - Time one IR op at one shape with the stdlib kernels --===//
#include "tools/profiler/OpTimer.h"

#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/attention/AttentionCuda.h"
#include "stdlib/kernels/attention/AttentionCudnn.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"
#include "stdlib/kernels/embedding/EmbeddingCuda.h"
#include "stdlib/kernels/layernorm/LayerNormCuda.h"
#include "stdlib/kernels/linear/LinearCuda.h"
#include "stdlib/kernels/rmsnorm/RMSNormCuda.h"
#include "stdlib/kernels/rope/RopeCuda.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"
#include "tools/profiler/OpSetup.h"

#include <functional>
#include <numeric>
#include <type_traits>
#include <vector>

namespace mist::profiler {

using namespace mist::kernels;

namespace {

/// The buffers of one measurement, freed together.
class Arena {
public:
  explicit Arena(cudaStream_t stream) : stream(stream) {}
  float *floats(int64_t n) {
    auto b = std::make_unique<DeviceBuffer<float>>(static_cast<size_t>(n));
    fillRandom(b->get(), b->size(), seed++, 1.f, stream);
    float *p = b->get();
    f32.push_back(std::move(b));
    return p;
  }
  __nv_bfloat16 *bf16(int64_t n) {
    auto b = std::make_unique<DeviceBuffer<__nv_bfloat16>>(static_cast<size_t>(n));
    fillRandom(b->get(), b->size(), seed++, 1.f, stream);
    __nv_bfloat16 *p = b->get();
    b16.push_back(std::move(b));
    return p;
  }
  /// n activations or parameters in the profiled storage type.
  template <typename T> T *act(int64_t n) {
    if constexpr (std::is_same_v<T, float>)
      return floats(n);
    else
      return bf16(n);
  }
  /// q, k and v (or their gradients) of B x T tokens with H query and KV
  /// key/value heads of D dims: views into one [B, T, W] buffer (fused, W =
  /// (H + 2 KV) D), or three buffers.
  template <typename T> struct Qkv { T *q, *k, *v; };
  template <typename T>
  Qkv<T> qkv(bool fused, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t D, int64_t W) {
    if (fused) {
      T *all = act<T>(B * T_ * W);
      return {all, all + H * D, all + (H + KV) * D};
    }
    return {act<T>(B * T_ * H * D), act<T>(B * T_ * KV * D), act<T>(B * T_ * KV * D)};
  }
  int32_t *ints(int64_t n, int64_t bound) {
    auto b = std::make_unique<DeviceBuffer<int32_t>>(static_cast<size_t>(n));
    fillRandomInts(b->get(), b->size(), seed++, static_cast<int32_t>(bound), stream);
    int32_t *p = b->get();
    i32.push_back(std::move(b));
    return p;
  }

private:
  cudaStream_t stream;
  uint32_t seed = 1;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> f32;
  std::vector<std::unique_ptr<DeviceBuffer<__nv_bfloat16>>> b16;
  std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> i32;
};

/// Sets up one op and returns the launch to time. Storage is the type of
/// the activations and parameters: bf16 with --linear-grad bf16 (the
/// default: what a bf16 trainer runs: bf16 GEMMs forward and backward, the
/// bf16 kernels, attention on cuDNN where built), fp32 otherwise.
/// Statistics and parameter gradients are fp32 either way.
template <typename Storage> class Setup final : public OpSetup {
  static constexpr bool isBf16 = !std::is_same_v<Storage, float>;

public:
  Setup(const ShapeEntry &e, Arena &mem, cudaStream_t s, LinearContext &linear, LinearGradMode mode)
      : OpSetup(e), mem(mem), s(s), linear(linear), mode(mode) {}

private:
  Call gemm(bool lmHead) override {
    operands(2, lmHead ? 2 : 3);
    need(ops[1].size() == 2, "the weight must have rank 2");
    const int64_t in = last(0), rows = rowsOf(0);
    // lm_head's table is [vocab, channels]: the GEMM is x [rows, C] * [C, V].
    const int64_t outF = lmHead ? ops[1][0] : ops[1][1];
    need((lmHead ? ops[1][1] : ops[1][0]) == in, "the weight does not match the input");
    if (mode != LinearGradMode::Bf16Gemms) {
      // The fp32 trainer's path: fp32 data through linearFwdCuda (tf32 or
      // exact math, as the context says); the LM head's transposed table
      // costs the same GEMM.
      LinearArgs a{};
      a.out = mem.floats(rows * outF);
      a.inp = mem.floats(rows * in);
      a.weight = mem.floats(in * outF);
      a.bias = ops.size() == 3 ? mem.floats(outF) : nullptr;
      a.rows = rows;
      a.in = in;
      a.outFeatures = outF;
      return [=, this] { checkCublas(linearFwdCuda(a, s, &linear), "linearFwdCuda"); };
    }
    __nv_bfloat16 *x = mem.bf16(rows * in), *w = mem.bf16(in * outF), *y = mem.bf16(rows * outF);
    __nv_bfloat16 *bias = ops.size() == 3 ? mem.bf16(outF) : nullptr;
    return [=, this] {
      checkCublas(linearFwdBf16Cuda(y, x, w, bias, rows, in, outF, s, &linear),
                  "linearFwdBf16Cuda");
    };
  }

  Call gemmGrad(bool lmHead) override {
    operands(3, 3);
    need(ops[2].size() == 2, "the weight must have rank 2");
    const int64_t in = last(1), rows = rowsOf(1);
    const int64_t outF = last(0);
    need(rowsOf(0) == rows, "dy and x differ in rows");
    const bool bias = !lmHead && e.word("bias", "true") == "true";
    // The bf16 trainer's backward (the LM head's two GEMMs cost the same):
    // dx = dy Wᵀ in bf16, dW += xᵀ dy into fp32, db += Σ dy; or the fp32 one.
    if (mode == LinearGradMode::Bf16Gemms)
      return linearBackward<LinearBf16Args>(rows, in, outF, bias);
    return linearBackward<LinearArgs>(rows, in, outF, bias);
  }

  /// linearBwdCuda on random buffers: Args is LinearArgs or LinearBf16Args.
  template <typename Args> Call linearBackward(int64_t rows, int64_t in, int64_t outF, bool bias) {
    using Data = std::remove_const_t<std::remove_pointer_t<decltype(Args::inp)>>;
    Args a{};
    a.inp = mem.act<Data>(rows * in);
    a.weight = mem.act<Data>(in * outF);
    a.dinp = mem.act<Data>(rows * in);
    a.dweight = mem.floats(in * outF);
    a.dbias = bias ? mem.floats(outF) : nullptr;
    a.dout = mem.act<Data>(rows * outF);
    a.rows = rows;
    a.in = in;
    a.outFeatures = outF;
    return [=, this] { checkCublas(linearBwdCuda(a, s, &linear), "linearBwdCuda"); };
  }

  Call attention(bool grad) override {
    need(e.word("flash", "true") == "true", "flash = false: the CUDA kernel is flash attention");
    need(e.number("dropout", 0) == 0, "attention dropout: the CUDA kernel has none");
    const bool fused = ops.size() == (grad ? 4u : 1u);
    need(fused || ops.size() == (grad ? 6u : 3u), "unexpected operand count for attention");
    const size_t q = grad ? 1 : 0;
    need(ops[q].size() == 3, "q must be [batch, seq, width]");
    const int64_t H = sizeAttr("heads"), KV = sizeAttr("kv_heads"), D = sizeAttr("head_dim");
    need(H % KV == 0, "heads must be a multiple of kv_heads");
    const int64_t B = ops[q][0], T = ops[q][1], W = ops[q][2];
    need(fused ? W == (H + 2 * KV) * D : W == H * D, "the operand widths do not match the heads");
    const bool causal = e.word("causal", "true") == "true";
    if constexpr (isBf16) {
      // The bf16 trainer's attention: cuDNN where built and it takes the
      // shape (else the fp32 kernels below, its fallback).
      if (Call c = cudnnAttention(grad, fused, B, T, H, KV, D, W, causal))
        return c;
    }
    need(attentionCudaSupportsHeadDim(D),
         "head dim " + std::to_string(D) + ": the CUDA kernel has 64 and 128 only");
    AttentionArgs a{};
    attentionInputs<float>(a, fused, B, T, H, KV, D, W, causal);
    if (!grad)
      return [=, this] { checkCuda(attentionFwdCuda(a, s), "attentionFwdCuda"); };
    checkCuda(attentionFwdCuda(a, s), "attentionFwdCuda"); // out and lse for the backward
    a.dout = mem.floats(B * T * H * D);
    const auto grads = mem.qkv<float>(fused, B, T, H, KV, D, W);
    a.dq = grads.q, a.dk = grads.k, a.dv = grads.v;
    return [=, this] { checkCuda(attentionBwdCuda(a, s), "attentionBwdCuda"); };
  }

  /// The shape, out, lse and q/k/v of attention arguments (AttentionArgs in
  /// fp32, AttentionCudnnArgs in bf16: the same fields).
  template <typename T, typename Args>
  void attentionInputs(Args &a, bool fused, int64_t B, int64_t T_, int64_t H, int64_t KV, int64_t D,
                       int64_t W, bool causal) {
    a.batch = B;
    a.seq = T_;
    a.heads = H;
    a.kvHeads = KV;
    a.headDim = D;
    a.causal = causal;
    a.out = mem.act<T>(B * T_ * H * D);
    a.lse = mem.floats(B * H * T_);
    const auto in = mem.qkv<T>(fused, B, T_, H, KV, D, W);
    a.q = in.q, a.k = in.k, a.v = in.v;
    a.qStride = fused ? W : H * D;
    a.kvStride = fused ? W : KV * D;
  }

  /// cuDNN's attention on bf16 buffers, or an empty Call where cuDNN does
  /// not run it (not built, or it refuses the shape).
  Call cudnnAttention(bool grad, bool fused, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t D,
                      int64_t W, bool causal) {
    if (!attentionCudnnBuilt())
      return {};
    AttentionCudnnArgs a{};
    attentionInputs<__nv_bfloat16>(a, fused, B, T, H, KV, D, W, causal);
    AttentionCudnnContext &cudnn = AttentionCudnnContext::processDefault();
    if (!attentionFwdCudnn(a, s, &cudnn).ok())
      return {};
    if (!grad)
      return [=, this] {
        AttentionCudnnStatus rc = attentionFwdCudnn(a, s, &AttentionCudnnContext::processDefault());
        if (!rc.ok())
          throw GpuError(rc.message());
      };
    a.dout = mem.bf16(B * T * H * D);
    const auto grads = mem.qkv<__nv_bfloat16>(fused, B, T, H, KV, D, W);
    a.dq = grads.q, a.dk = grads.k, a.dv = grads.v;
    std::string why; // as the trainer runs it (CudaOps.cu)
    if (!attentionBwdCudnnAnyAlgorithm(a, s, cudnn, why).ok())
      return {};
    return [=, this] {
      AttentionCudnnStatus rc = attentionBwdCudnn(a, s, &AttentionCudnnContext::processDefault());
      if (!rc.ok())
        throw GpuError(rc.message());
    };
  }

  Call layerNorm(bool grad) override {
    operands(grad ? 4 : 2, grad ? 5 : 3);
    const size_t x = grad ? 1 : 0;
    const bool bias = ops.size() == (grad ? 5u : 3u);
    LayerNormArgsOf<Storage> a{};
    a.rows = rowsOf(x);
    a.channels = last(x);
    a.eps = static_cast<float>(e.number("eps", 1e-5));
    a.inp = mem.act<Storage>(a.rows * a.channels);
    a.weight = mem.act<Storage>(a.channels);
    a.bias = bias ? mem.act<Storage>(a.channels) : nullptr;
    a.out = mem.act<Storage>(a.rows * a.channels);
    a.mean = mem.floats(a.rows);
    a.rstd = mem.floats(a.rows);
    if (!grad)
      return [=, this] { checkCuda(layerNormFwdCuda(a, s), "layerNormFwdCuda"); };
    checkCuda(layerNormFwdCuda(a, s), "layerNormFwdCuda"); // mean and rstd
    a.dout = mem.act<Storage>(a.rows * a.channels);
    a.dinp = mem.act<Storage>(a.rows * a.channels);
    a.dweight = mem.floats(a.channels);
    a.dbias = bias ? mem.floats(a.channels) : nullptr;
    return [=, this] { checkCuda(layerNormBwdCuda(a, s), "layerNormBwdCuda"); };
  }

  Call rmsNorm(bool grad) override {
    operands(grad ? 4 : 2, grad ? 4 : 2);
    const size_t x = grad ? 1 : 0;
    RMSNormArgsOf<Storage> a{};
    a.rows = rowsOf(x);
    a.channels = last(x);
    a.eps = static_cast<float>(e.number("eps", 1e-5));
    a.inp = mem.act<Storage>(a.rows * a.channels);
    a.weight = mem.act<Storage>(a.channels);
    a.out = mem.act<Storage>(a.rows * a.channels);
    a.rstd = mem.floats(a.rows);
    if (!grad)
      return [=, this] { checkCuda(rmsNormFwdCuda(a, s), "rmsNormFwdCuda"); };
    checkCuda(rmsNormFwdCuda(a, s), "rmsNormFwdCuda"); // rstd
    a.dout = mem.act<Storage>(a.rows * a.channels);
    a.dinp = mem.act<Storage>(a.rows * a.channels);
    a.dweight = mem.floats(a.channels);
    return [=, this] { checkCuda(rmsNormBwdCuda(a, s), "rmsNormBwdCuda"); };
  }

  Call rope(bool grad) override {
    operands(1, 1);
    need(ops[0].size() >= 3, "rope's input must be [batch, seq, ...]");
    const int64_t D = sizeAttr("head_dim");
    const int64_t width = elements(ops[0]) / (ops[0][0] * ops[0][1]);
    need(D > 0 && D % 2 == 0 && width % D == 0, "needs an even head_dim dividing the width");
    RopeArgsOf<Storage> a{};
    a.batch = ops[0][0];
    a.seq = ops[0][1];
    a.headDim = D;
    a.heads = width / D;
    a.theta = static_cast<float>(e.number("theta", 10000));
    a.inverse = grad;
    a.inp = mem.act<Storage>(elements(ops[0]));
    a.out = mem.act<Storage>(elements(ops[0]));
    return [=, this] { checkCuda(ropeCuda(a, s), "ropeCuda"); };
  }

  Call elementwise(const std::string &op) override {
    const bool grad = op.size() > 5 && op.compare(op.size() - 5, 5, "_grad") == 0;
    const bool binary = op == "mul" || op == "add" || op == "grad_add" || op == "mul_grad";
    const size_t want = (binary ? 2 : 1) + (grad ? 1 : 0);
    operands(want, want);
    const int64_t n = elements(ops[0]);
    for (const auto &o : ops)
      need(elements(o) == n, "the operands differ in size");
    ElementwiseArgsOf<Storage> a{};
    a.n = n;
    a.a = mem.act<Storage>(n);
    a.b = binary ? mem.act<Storage>(n) : nullptr;
    if (grad) {
      a.dout = mem.act<Storage>(n);
      a.da = mem.act<Storage>(n);
      a.db = binary ? mem.act<Storage>(n) : nullptr;
    } else {
      a.out = mem.act<Storage>(n);
    }
    const bool exactGelu = e.word("approximate", "true") == "false";
    using Kernel = cudaError_t (*)(const ElementwiseArgsOf<Storage> &, cudaStream_t);
    Kernel fn = addFwdCuda; // add, grad_add
    if (op == "gelu" && exactGelu)
      fn = geluExactFwdCuda;
    else if (op == "gelu")
      fn = geluFwdCuda;
    else if (op == "gelu_grad" && exactGelu)
      fn = geluExactBwdCuda;
    else if (op == "gelu_grad")
      fn = geluBwdCuda;
    else if (op == "silu")
      fn = siluFwdCuda;
    else if (op == "silu_grad")
      fn = siluBwdCuda;
    else if (op == "mul")
      fn = mulFwdCuda;
    else if (op == "mul_grad")
      fn = mulBwdCuda;
    return [=, this] { checkCuda(fn(a, s), "elementwise kernel"); };
  }

  Call embedding(bool grad) override {
    operands(2, 2);
    EmbeddingArgsOf<Storage> a{};
    if (!grad) { // ids [b, s], table [V, C]
      need(ops[1].size() == 2, "the table must have rank 2");
      a.tokens = elements(ops[0]);
      a.vocab = ops[1][0];
      a.channels = ops[1][1];
      a.ids = mem.ints(a.tokens, a.vocab);
      a.table = mem.act<Storage>(a.vocab * a.channels);
      a.out = mem.act<Storage>(a.tokens * a.channels);
      return [=, this] { checkCuda(embeddingFwdCuda(a, s), "embeddingFwdCuda"); };
    }
    // dy [b, s, C], ids [b, s]: the table's rows are not in the key; the
    // `rows` attribute is the whole vocabulary (every id in this slice).
    a.vocab = sizeAttr("rows");
    need(a.vocab > 0, "needs the rows attribute (the vocabulary)");
    a.tokens = elements(ops[1]);
    a.channels = last(0);
    need(elements(ops[0]) == a.tokens * a.channels, "dy does not match the ids");
    a.ids = mem.ints(a.tokens, a.vocab);
    a.dout = mem.act<Storage>(a.tokens * a.channels);
    a.dtable = mem.floats(a.vocab * a.channels);
    return [=, this] { checkCuda(embeddingBwdCuda(a, s), "embeddingBwdCuda"); };
  }

  Call positionEmbeddingGrad() override {
    operands(1, 1);
    need(ops[0].size() == 3, "dy must be [batch, seq, channels]");
    PositionEmbeddingArgsOf<Storage> a{};
    a.tokens = ops[0][0] * ops[0][1];
    a.seq = ops[0][1];
    a.channels = ops[0][2];
    a.dout = mem.act<Storage>(elements(ops[0]));
    a.dtable = mem.floats(a.seq * a.channels);
    return [=, this] { checkCuda(positionEmbeddingBwdCuda(a, s), "positionEmbeddingBwdCuda"); };
  }

  Call crossEntropy(bool grad) override {
    operands(grad ? 4 : 2, grad ? 4 : 2);
    const size_t logits = grad ? 1 : 0;
    CrossEntropyArgsOf<Storage> a{};
    a.vocab = last(logits);
    a.rows = rowsOf(logits);
    a.totalRows = a.rows;
    a.vocabStart = 0;
    a.logits = mem.act<Storage>(a.rows * a.vocab);
    a.targets = mem.ints(a.rows, a.vocab);
    a.rowMax = mem.floats(a.rows);
    a.sumExp = mem.floats(a.rows);
    a.targetLogit = mem.floats(a.rows);
    float *loss = mem.floats(1);
    auto forward = [=, this] {
      checkCuda(crossEntropyMaxCuda(a, s), "crossEntropyMaxCuda");
      checkCuda(crossEntropySumCuda(a, s), "crossEntropySumCuda");
      // The loss reads the statistics only: its fp32 entry point.
      CrossEntropyArgs stats{};
      stats.rows = stats.totalRows = a.rows;
      stats.rowMax = a.rowMax;
      stats.sumExp = a.sumExp;
      stats.targetLogit = a.targetLogit;
      checkCuda(crossEntropyLossCuda(stats, loss, s), "crossEntropyLossCuda");
    };
    if (!grad)
      return forward;
    forward(); // row max and sum of exponentials for the backward
    a.dlogits = mem.act<Storage>(a.rows * a.vocab);
    return [=, this] { checkCuda(crossEntropyBwdCuda(a, s), "crossEntropyBwdCuda"); };
  }

  Arena &mem;
  cudaStream_t s;
  LinearContext &linear;
  LinearGradMode mode;
};

} // namespace

OpTimer::OpTimer(const OpTimerOptions &opts, cudaStream_t stream)
    : opts(opts), stream(stream),
      linear(std::make_unique<LinearContext>(
          opts.linearGrad == LinearGradMode::Tf32 ? LinearMath::Tf32 : LinearMath::Fp32)) {}

OpTimer::~OpTimer() = default;

OpTime OpTimer::time(const ShapeEntry &e) {
  OpTime t;
  try {
    Arena mem(stream);
    std::function<void()> launch;
    if (opts.linearGrad == LinearGradMode::Bf16Gemms)
      launch = Setup<__nv_bfloat16>(e, mem, stream, *linear, opts.linearGrad).build();
    else
      launch = Setup<float>(e, mem, stream, *linear, opts.linearGrad).build();
    t.seconds = medianSeconds(stream, opts.warmup, opts.repeats, launch);
    t.timed = t.seconds > 0;
    if (!t.timed)
      t.why = "measured no time";
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } catch (const NotTimed &n) {
    t.timed = false;
    t.why = n.why;
  } catch (const GpuError &g) {
    t.timed = false;
    t.why = g.what();
  }
  return t;
}

} // namespace mist::profiler
