//===- KernelBench.cu - The bf16 kernels against the H100's ceilings -------===//
/// \file
/// mist-bench-kernels: each kernel the bf16 GPU trainer runs, at one GPT
/// layer's shapes (default GPT-3 1.3B, micro-batch 4, sequence 2048), timed
/// with CUDA events (median of --repeats after --warmup), and compared with
/// the ceiling measured on the project's H100
/// (../shared/reference/h100-measured.md, 2026-11-22):
///   GEMMs      716 TFLOP/s  bf16 GEMM 8192³ (cuBLAS through PyTorch)
///   attention  469 TFLOP/s forward, 333 forward + backward (PyTorch's SDPA
///              flash attention, causal, B4 H16 s2048 d128; causal FLOPs:
///              forward 2·B·H·s²·D, backward 2.5 times that)
///   the rest   3.0 TB/s device-to-device copy (bytes read + written): norms,
///              elementwise, the loss and AdamW are memory-bound, so their
///              figure is the bytes they must move over their time.
/// On another GPU the ceilings are still the H100's (the table says which
/// GPU ran). Prints a table; --json writes the rows.
///   mist-bench-kernels [--batch 4] [--seq 2048] [--hidden 2048] [--heads 16]
///                      [--vocab 50304] [--repeats 10] [--warmup 3] [--json FILE]
/// Exits 77 without a GPU.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/adamw/AdamWCuda.h"
#include "stdlib/kernels/attention/AttentionCuda.h"
#include "stdlib/kernels/attention/AttentionCudnn.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"
#include "stdlib/kernels/layernorm/LayerNormCuda.h"
#include "stdlib/kernels/linear/LinearCuda.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace mist::kernels;
using mist::profiler::checkCublas;
using mist::profiler::checkCuda;
using mist::profiler::DeviceBuffer;
using mist::profiler::fillRandom;
using mist::profiler::fillRandomInts;
using mist::profiler::GpuError;
using bf16 = __nv_bfloat16;

constexpr double gemmCeiling = 716e12, attentionFwdCeiling = 469e12,
                 attentionFwdBwdCeiling = 333e12, copyCeiling = 3.0e12;

struct Options {
  Index batch = 4, seq = 2048, hidden = 2048, heads = 16, vocab = 50304;
  int repeats = 10, warmup = 3;
  std::string json;
};

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "mist-bench-kernels: %s\nusage: mist-bench-kernels [--batch N] [--seq N] "
               "[--hidden N] [--heads N] [--vocab N] [--repeats N] [--warmup N] [--json FILE]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc)
      usage(("missing a value after " + flag).c_str());
    const char *value = argv[++i];
    if (flag == "--json") {
      o.json = value;
      continue;
    }
    char *end = nullptr;
    long long v = std::strtoll(value, &end, 10);
    if (!*value || *end || v < 1)
      usage((flag + " needs a positive integer, not '" + value + "'").c_str());
    if (flag == "--batch")
      o.batch = v;
    else if (flag == "--seq")
      o.seq = v;
    else if (flag == "--hidden")
      o.hidden = v;
    else if (flag == "--heads")
      o.heads = v;
    else if (flag == "--vocab")
      o.vocab = v;
    else if (flag == "--repeats")
      o.repeats = int(v);
    else if (flag == "--warmup")
      o.warmup = int(v);
    else
      usage(("unknown flag " + flag).c_str());
  }
  if (o.hidden % o.heads)
    usage("--heads must divide --hidden");
  return o;
}

/// One row of the table: `work` is FLOPs or bytes, per `unit`.
struct Row {
  Row(std::string kernel, std::string shape, std::string unit, double seconds, double work,
      double ceiling)
      : kernel(std::move(kernel)), shape(std::move(shape)), unit(std::move(unit)), seconds(seconds),
        work(work), ceiling(ceiling) {}
  std::string kernel, shape, unit;
  double seconds = 0, work = 0, ceiling = 0;
  std::string note; ///< why it did not run, if it did not
};

/// Owns the benchmark's device buffers (random contents).
class Buffers {
public:
  explicit Buffers(cudaStream_t s) : stream(s) {}
  bf16 *bf(Index n) { return add<bf16>(n); }
  float *f32(Index n) { return add<float>(n); }
  int32_t *ids(Index n, Index bound) {
    auto b = std::make_unique<DeviceBuffer<int32_t>>(size_t(n));
    fillRandomInts(b->get(), b->size(), seed++, int32_t(bound), stream);
    int32_t *p = b->get();
    i32.push_back(std::move(b));
    return p;
  }

private:
  template <typename T> T *add(Index n) {
    auto b = std::make_unique<DeviceBuffer<T>>(size_t(n));
    fillRandom(b->get(), b->size(), seed++, 1.f, stream);
    T *p = b->get();
    if constexpr (std::is_same_v<T, float>)
      f.push_back(std::move(b));
    else
      h.push_back(std::move(b));
    return p;
  }
  cudaStream_t stream;
  uint32_t seed = 1;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> f;
  std::vector<std::unique_ptr<DeviceBuffer<bf16>>> h;
  std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> i32;
};

class Bench {
public:
  Bench(const Options &o, cudaStream_t s) : o(o), s(s) {}

  /// Times `launch` (queued on the stream), or records why it could not run.
  void measure(Row row, const std::function<void()> &launch) {
    try {
      row.seconds = mist::profiler::medianSeconds(s, o.warmup, o.repeats, launch);
    } catch (const GpuError &e) {
      row.note = e.what();
    }
    rows.push_back(row);
  }
  void skip(Row row, std::string why) {
    row.note = std::move(why);
    rows.push_back(row);
  }

  void gemms(Buffers &mem, LinearContext &ctx) {
    const Index T = o.batch * o.seq, h = o.hidden;
    struct Shape {
      const char *name;
      Index in, out;
      bool bias;
    };
    for (Shape g : {Shape{"linear qkv", h, 3 * h, true}, Shape{"linear fc1", h, 4 * h, true},
                    Shape{"linear fc2", 4 * h, h, true}, Shape{"lm head", h, o.vocab, false}}) {
      LinearBf16Args a{mem.bf(T * g.out),
                       mem.bf(T * g.in),
                       mem.bf(g.in * g.out),
                       g.bias ? mem.bf(g.out) : nullptr,
                       mem.bf(T * g.in),
                       mem.f32(g.in * g.out),
                       g.bias ? mem.f32(g.out) : nullptr,
                       mem.bf(T * g.out),
                       T,
                       g.in,
                       g.out};
      const std::string shape =
          std::to_string(T) + "x" + std::to_string(g.in) + "x" + std::to_string(g.out);
      const double flops = 2.0 * double(T) * double(g.in) * double(g.out);
      measure({std::string(g.name) + " forward", shape, "TFLOP/s", 0, flops, gemmCeiling},
              [&] { checkCublas(linearFwdCuda(a, s, &ctx), "linearFwdCuda"); });
      measure({std::string(g.name) + " backward", shape, "TFLOP/s", 0, 2 * flops, gemmCeiling},
              [&] { checkCublas(linearBwdCuda(a, s, &ctx), "linearBwdCuda"); });
    }
  }

  void attention(Buffers &mem) {
    const Index B = o.batch, S = o.seq, H = o.heads, D = o.hidden / o.heads, T = B * S;
    const std::string shape = "B" + std::to_string(B) + " H" + std::to_string(H) + " s" +
                              std::to_string(S) + " d" + std::to_string(D) + " causal";
    const double fwd = 2.0 * double(B) * double(H) * double(S) * double(S) * double(D);
    Row forward{"attention forward (cuDNN)", shape, "TFLOP/s", 0, fwd, attentionFwdCeiling};
    Row both{"attention fwd+bwd (cuDNN)", shape, "TFLOP/s", 0, 3.5 * fwd, attentionFwdBwdCeiling};
    // A fused qkv buffer [T, 3·H·D], as the trainer's.
    bf16 *qkv = mem.bf(T * 3 * H * D), *dqkv = mem.bf(T * 3 * H * D);
    AttentionCudnnArgs a{mem.bf(T * H * D),
                         mem.f32(B * H * S),
                         qkv,
                         qkv + H * D,
                         qkv + 2 * H * D,
                         dqkv,
                         dqkv + H * D,
                         dqkv + 2 * H * D,
                         mem.bf(T * H * D),
                         B,
                         S,
                         H,
                         H,
                         D,
                         3 * H * D,
                         3 * H * D,
                         true};
    if (!attentionCudnnBuilt()) {
      skip(forward, "built without cuDNN");
      skip(both, "built without cuDNN");
    } else {
      AttentionCudnnStatus probe = attentionFwdCudnn(a, s, &cudnn);
      std::string why; // as the trainer runs it (CudaOps.cu)
      if (probe.ok())
        probe = attentionBwdCudnnAnyAlgorithm(a, s, cudnn, why);
      if (!why.empty())
        both.kernel += " non-deterministic";
      if (!probe.ok()) {
        skip(forward, probe.message());
        skip(both, probe.message());
      } else {
        auto ok = [](const AttentionCudnnStatus &rc) {
          if (!rc.ok())
            throw GpuError(rc.message());
        };
        measure(forward, [&] { ok(attentionFwdCudnn(a, s, &cudnn)); });
        measure(both, [&] {
          ok(attentionFwdCudnn(a, s, &cudnn));
          ok(attentionBwdCudnn(a, s, &cudnn));
        });
        // The other backward beside it: which one the trainer should default
        // to on this card depends on their times (deterministic keeps dS in
        // its workspace on Hopper with cuDNN < 9.25).
        if (cudnn.deterministicBackward()) {
          Row other = both;
          other.kernel = "attention fwd+bwd (cuDNN non-deterministic)";
          cudnn.setDeterministicBackward(false);
          AttentionCudnnStatus rc = attentionBwdCudnn(a, s, &cudnn);
          if (rc.ok())
            measure(other, [&] {
              ok(attentionFwdCudnn(a, s, &cudnn));
              ok(attentionBwdCudnn(a, s, &cudnn));
            });
          else
            skip(other, rc.message());
          cudnn.setDeterministicBackward(true);
        }
      }
    }
    // The fp32 kernels (the fallback), on fp32 buffers.
    Row fallback{
        "attention fwd+bwd (fp32 kernels)", shape, "TFLOP/s", 0, 3.5 * fwd, attentionFwdBwdCeiling};
    if (!attentionCudaSupportsHeadDim(D)) {
      skip(fallback, "head dim " + std::to_string(D) + " (the fp32 kernels have 64 and 128)");
      return;
    }
    float *q = mem.f32(T * 3 * H * D), *dq = mem.f32(T * 3 * H * D);
    AttentionArgs f{mem.f32(T * H * D),
                    mem.f32(B * H * S),
                    q,
                    q + H * D,
                    q + 2 * H * D,
                    dq,
                    dq + H * D,
                    dq + 2 * H * D,
                    mem.f32(T * H * D),
                    B,
                    S,
                    H,
                    H,
                    D,
                    3 * H * D,
                    3 * H * D,
                    true};
    measure(fallback, [&] {
      checkCuda(attentionFwdCuda(f, s), "attentionFwdCuda");
      checkCuda(attentionBwdCuda(f, s), "attentionBwdCuda");
    });
  }

  void memoryBound(Buffers &mem) {
    const Index T = o.batch * o.seq, h = o.hidden, V = o.vocab;
    const std::string rowsByH = std::to_string(T) + "x" + std::to_string(h);
    LayerNormBf16Args ln{mem.bf(T * h), mem.f32(T), mem.f32(T), mem.bf(T * h), mem.bf(h), mem.bf(h),
                         mem.bf(T * h), mem.f32(h), mem.f32(h), mem.bf(T * h), T,         h,
                         1e-5f};
    const double tokensBytes = double(T) * double(h) * 2; // one bf16 [T, h]
    measure({"layernorm forward", rowsByH, "TB/s", 0, 2 * tokensBytes, copyCeiling},
            [&] { checkCuda(layerNormFwdCuda(ln, s), "layerNormFwdCuda"); });
    // The parameter sums read x and dout; dinp reads them again and writes.
    measure({"layernorm backward", rowsByH, "TB/s", 0, 5 * tokensBytes, copyCeiling},
            [&] { checkCuda(layerNormBwdCuda(ln, s), "layerNormBwdCuda"); });

    const Index n = T * 4 * h;
    ElementwiseBf16Args e{mem.bf(n), mem.bf(n), mem.bf(n), mem.bf(n), nullptr, mem.bf(n), n};
    const std::string ffn = std::to_string(T) + "x" + std::to_string(4 * h);
    measure({"gelu forward", ffn, "TB/s", 0, 4.0 * double(n), copyCeiling},
            [&] { checkCuda(geluFwdCuda(e, s), "geluFwdCuda"); });
    measure({"gelu backward", ffn, "TB/s", 0, 6.0 * double(n), copyCeiling},
            [&] { checkCuda(geluBwdCuda(e, s), "geluBwdCuda"); });
    ElementwiseBf16Args add{e.out, e.a, e.b, nullptr, nullptr, nullptr, T * h};
    measure({"residual add", rowsByH, "TB/s", 0, 3 * tokensBytes, copyCeiling},
            [&] { checkCuda(addFwdCuda(add, s), "addFwdCuda"); });

    // The loss: the row max, the sums and the gradient each read the logits.
    CrossEntropyBf16Args ce{mem.bf(T * V),
                            mem.ids(T, V),
                            mem.f32(T),
                            mem.f32(T),
                            mem.f32(T),
                            mem.bf(T * V),
                            T,
                            V,
                            0,
                            T,
                            1.f};
    measure({"cross entropy (max, sums, grad)", std::to_string(T) + "x" + std::to_string(V), "TB/s",
             0, 4.0 * double(T) * double(V) * 2, copyCeiling},
            [&] {
              checkCuda(crossEntropyMaxCuda(ce, s), "crossEntropyMaxCuda");
              checkCuda(crossEntropySumCuda(ce, s), "crossEntropySumCuda");
              checkCuda(crossEntropyBwdCuda(ce, s), "crossEntropyBwdCuda");
            });

    // AdamW over one layer's worth of weights (12 h²): reads master, m, v and
    // the fp32 gradient, writes master, m, v and the bf16 weight.
    const Index p = 12 * h * h;
    AdamWBf16Args w{mem.f32(p), mem.f32(p), mem.f32(p), mem.bf(p), mem.f32(p), p, 1e-4f,
                    0.9f,       0.95f,      1e-8f,      0.1f,      1.f,        1};
    measure({"adamw (bf16 weights)", std::to_string(p), "TB/s", 0, 30.0 * double(p), copyCeiling},
            [&] { checkCuda(adamWCuda(w, s), "adamWCuda"); });
  }

  std::vector<Row> rows;

private:
  const Options &o;
  cudaStream_t s;
  AttentionCudnnContext cudnn;
};

__global__ void emptyKernel() {}

/// Seconds per kernel of `count` empty kernels in a row on `s`: launched
/// one by one (the host's launch rate or the GPU's gap between kernels,
/// whichever is slower), or replayed from a CUDA graph (the GPU's gap
/// alone). A component fact for pricing many small kernels.
double perKernelSeconds(const Options &o, cudaStream_t s, bool graph, int count = 1000) {
  cudaGraph_t captured = nullptr;
  cudaGraphExec_t exec = nullptr;
  auto chain = [&] {
    for (int i = 0; i < count; ++i)
      emptyKernel<<<1, 32, 0, s>>>();
  };
  if (graph) {
    checkCuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture");
    chain();
    checkCuda(cudaStreamEndCapture(s, &captured), "cudaStreamEndCapture");
    checkCuda(cudaGraphInstantiate(&exec, captured, 0), "cudaGraphInstantiate");
  }
  const double seconds = mist::profiler::medianSeconds(s, o.warmup, o.repeats, [&] {
    if (graph)
      checkCuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    else
      chain();
  });
  if (exec)
    cudaGraphExecDestroy(exec);
  if (captured)
    cudaGraphDestroy(captured);
  return seconds / count;
}

std::string jsonString(const std::string &v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20)
      out += c;
  }
  return out + "\"";
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("mist-bench-kernels: no GPU; skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  cudaStream_t s = nullptr;
  try {
    checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    Bench bench(o, s);
    {
      Buffers mem(s);
      LinearContext ctx;
      bench.gemms(mem, ctx);
    }
    {
      Buffers mem(s);
      bench.attention(mem);
    }
    {
      Buffers mem(s);
      bench.memoryBound(mem);
    }
    const double streamUs = 1e6 * perKernelSeconds(o, s, false),
                 graphUs = 1e6 * perKernelSeconds(o, s, true);
    std::printf("%s; ceilings: the H100's (h100-measured.md)\n", prop.name);
    std::printf("%-38s %-26s %9s %10s %9s %7s\n", "kernel", "shape", "ms", "achieved", "ceiling",
                "% ceil");
    for (const Row &r : bench.rows) {
      if (!r.note.empty()) {
        std::printf("%-38s %-26s   not run: %s\n", r.kernel.c_str(), r.shape.c_str(),
                    r.note.c_str());
        continue;
      }
      const double scale = 1e-12, achieved = r.work / r.seconds;
      std::printf("%-38s %-26s %9.3f %6.1f %-3s %6.0f %6.1f%%\n", r.kernel.c_str(), r.shape.c_str(),
                  r.seconds * 1e3, achieved * scale, r.unit == "TB/s" ? "TB" : "TF",
                  r.ceiling * scale, 100 * achieved / r.ceiling);
    }
    std::printf("empty kernels, 1000 in a row: %.2f us each launched one by one, %.2f us each "
                "from a CUDA graph\n",
                streamUs, graphUs);
    if (!o.json.empty()) {
      std::ofstream f(o.json);
      f << "{\n \"gpu\": " << jsonString(prop.name)
        << ",\n \"empty_kernel_us\": {\"stream\": " << streamUs << ", \"graph\": " << graphUs
        << "},\n \"kernels\": [\n";
      for (size_t i = 0; i < bench.rows.size(); ++i) {
        const Row &r = bench.rows[i];
        f << "  {\"kernel\": " << jsonString(r.kernel) << ", \"shape\": " << jsonString(r.shape)
          << ", \"unit\": " << jsonString(r.unit) << ", \"ceiling\": " << r.ceiling * 1e-12;
        if (r.note.empty())
          f << ", \"ms\": " << r.seconds * 1e3 << ", \"achieved\": " << r.work / r.seconds * 1e-12
            << ", \"percent_of_ceiling\": " << 100 * r.work / r.seconds / r.ceiling;
        else
          f << ", \"not_run\": " << jsonString(r.note);
        f << "}" << (i + 1 < bench.rows.size() ? "," : "") << "\n";
      }
      f << " ]\n}\n";
      if (!f)
        throw GpuError("cannot write " + o.json);
    }
  } catch (const GpuError &e) {
    std::fprintf(stderr, "mist-bench-kernels: %s\n", e.what());
    return 1;
  }
  cudaStreamDestroy(s);
  return 0;
}
