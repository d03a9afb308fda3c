//===- AttentionCudnn.cpp - Flash attention in bf16 through cuDNN ---------===//
/// \file
/// Host code only: the kernels are cuDNN's. Built with MIST_HAVE_CUDNN when
/// CMake found cuDNN and the cuDNN frontend headers (cmake/MistCudnn.cmake);
/// without it, the same entry points check their arguments and return
/// Unsupported, and the callers run the fp32 kernels.
///
/// Mapping to cuDNN. cuDNN's SDPA names its dimensions [b, h, s, d] and takes
/// any strides, so each buffer is described where it lies:
///   q        dims [B, H,  T, D]  strides [T·qStride,  D, qStride,  1]
///   k, v     dims [B, KV, T, D]  strides [T·kvStride, D, kvStride, 1]
///   out/dout dims [B, H,  T, D]  strides [T·H·D,      D, H·D,      1]
///   lse      dims [B, H,  T, 1]  strides [H·T,        T, 1,        1]
/// and dq, dk, dv have q's, k's and v's. cuDNN supports GQA natively (h of
/// k and v dividing h of q, query head h reading kv head h / (H / KV), the
/// same grouping as ours), and its backward sums dk and dv over the group.
///
/// Semantics checked against the frontend's headers (1.32):
///   - "Stats" is fp32 and, unless set_stats_use_log2 asks for base 2, the
///     natural-log log-sum-exp max + ln Σ exp(s - max) of the scaled, masked
///     scores of the row: exactly our lse, so it is written in place and
///     read back by the backward without conversion.
///   - The causal mask is the diagonal band with right bound 0 and top-left
///     alignment (key s ≤ query t, what set_causal_mask sets): our mask.
///   - The scale is the attention scale attribute, 1 / √D, applied to q·k
///     before the mask and the softmax, as ours.
///   - Q, K, V, O, dO, dQ, dK, dV are declared with the frontend's default
///     16-byte alignment: their strides must be multiples of 8 elements and
///     their pointers 16-byte aligned (the frontend checks the strides when it
///     validates and the pointers when it executes; we check the pointers
///     first and answer Unsupported, so such a call falls back).
///
/// Graph life cycle: validate, build_operation_graph, create_execution_plans
/// (heuristics mode A, then the fallback list), check_support, build_plans
/// run once per configuration and the graph is cached in the context; every
/// call then only sets the stream and executes it with the variant pack (the
/// device pointers) and the context's workspace.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/attention/AttentionCudnn.h"

#include <cstdint>
#include <exception>
#include <string>

#ifdef MIST_HAVE_CUDNN
#include <array>
#include <cmath>
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <map>
#include <sstream>
#include <unordered_map>
#endif

namespace mist::kernels {

namespace {

AttentionCudnnStatus unsupported(std::string message) {
  return {AttentionCudnnCode::Unsupported, std::move(message)};
}

AttentionCudnnStatus failed(std::string message) {
  return {AttentionCudnnCode::Failed, std::move(message)};
}

/// The argument checks of both builds; `empty` when there is nothing to do.
AttentionCudnnStatus checkArgs(const AttentionCudnnArgs &a, bool backward, bool &empty) {
  const char *op = backward ? "attentionBwdCudnn: " : "attentionFwdCudnn: ";
  empty = false;
  if (a.batch < 0 || a.seq < 0 || a.heads < 1 || a.kvHeads < 1 || a.headDim < 1)
    return failed(op + std::string("batch and seq must be >= 0, heads, kvHeads and headDim >= 1"));
  if (a.heads % a.kvHeads != 0)
    return failed(op + std::string("heads (") + std::to_string(a.heads) +
                  ") is not a multiple of kvHeads (" + std::to_string(a.kvHeads) + ")");
  if (a.qStride < a.heads * a.headDim || a.kvStride < a.kvHeads * a.headDim)
    return failed(op + std::string("qStride must be >= heads * headDim and kvStride >= "
                                   "kvHeads * headDim"));
  if (a.batch == 0 || a.seq == 0) {
    empty = true;
    return {};
  }
  bool missing = !a.out || !a.q || !a.k || !a.v;
  if (backward)
    missing = missing || !a.lse || !a.dq || !a.dk || !a.dv || !a.dout;
  if (missing)
    return failed(op + std::string(backward
                                       ? "out, lse, q, k, v, dq, dk, dv and dout must not be null"
                                       : "out, q, k and v must not be null"));
  return {};
}

} // namespace

AttentionCudnnContext &AttentionCudnnContext::processDefault() {
  static AttentionCudnnContext *context = new AttentionCudnnContext(); // leaked on purpose
  return *context;
}

#ifdef MIST_HAVE_CUDNN

namespace fe = cudnn_frontend;

/// What the context's state holds (a named namespace: State, which has
/// external linkage, has members of these types).
namespace attention_cudnn {

/// Everything that shapes a graph: forward or backward, the sizes, the
/// strides, causal, whether the forward writes lse, whether the backward must
/// be deterministic. Pointer alignment is not in it: every graph declares
/// 16-byte alignment and misaligned pointers are refused before the lookup.
using GraphKey = std::array<int64_t, 11>;

/// A configuration's graph, or why cuDNN refused it.
struct CachedGraph {
  std::shared_ptr<fe::graph::Graph> graph; ///< null when refused
  int64_t workspaceBytes = 0;
  AttentionCudnnStatus refusal; ///< Unsupported (or Failed) when graph is null
};

} // namespace attention_cudnn

using attention_cudnn::CachedGraph;
using attention_cudnn::GraphKey;

namespace {

/// The uids of the tensors in the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv };

/// The frontend's name of an error code (its own printer needs the JSON
/// library we leave out).
const char *codeName(fe::error_code_t code) {
  switch (code) {
  case fe::error_code_t::OK:
    return "OK";
  case fe::error_code_t::ATTRIBUTE_NOT_SET:
    return "ATTRIBUTE_NOT_SET";
  case fe::error_code_t::SHAPE_DEDUCTION_FAILED:
    return "SHAPE_DEDUCTION_FAILED";
  case fe::error_code_t::INVALID_TENSOR_NAME:
    return "INVALID_TENSOR_NAME";
  case fe::error_code_t::INVALID_VARIANT_PACK:
    return "INVALID_VARIANT_PACK";
  case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    return "GRAPH_NOT_SUPPORTED";
  case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
    return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
  case fe::error_code_t::GRAPH_EXECUTION_FAILED:
    return "GRAPH_EXECUTION_FAILED";
  case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    return "HEURISTIC_QUERY_FAILED";
  case fe::error_code_t::CUDA_API_FAILED:
    return "CUDA_API_FAILED";
  case fe::error_code_t::CUDNN_BACKEND_API_FAILED:
    return "CUDNN_BACKEND_API_FAILED";
  case fe::error_code_t::INVALID_CUDA_DEVICE:
    return "INVALID_CUDA_DEVICE";
  case fe::error_code_t::HANDLE_ERROR:
    return "HANDLE_ERROR";
  default:
    return "error";
  }
}

std::string describe(fe::error_t &e) {
  std::ostringstream text;
  text << codeName(e.get_code()) << " (" << int(e.get_code()) << "): " << e.get_message();
  return text.str();
}

std::string cudnnVersionText() {
  size_t v = cudnnGetVersion(); // e.g. 91900 for 9.19.0
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

struct AttentionCudnnContext::State {
  cudnnHandle_t handle = nullptr;
  int device = -1;
  AttentionCudnnStatus createStatus; ///< not Ok when the handle could not be created
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  std::map<GraphKey, CachedGraph> graphs;

  ~State() {
    graphs.clear(); // the plans before the handle they were built with
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cudnnDestroy(handle);
  }

  /// At least `bytes` of workspace. Growing frees the old one, which queued
  /// work on `stream` may still use, so it waits for the stream first.
  AttentionCudnnStatus reserve(size_t bytes, cudaStream_t stream) {
    if (bytes <= workspaceBytes)
      return {};
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
        capture != cudaStreamCaptureStatusNone)
      return failed("the cuDNN attention workspace must grow to " + std::to_string(bytes) +
                    " bytes while the stream is being captured: run this shape once before "
                    "capturing");
    if (workspace) {
      if (cudaError_t rc = cudaStreamSynchronize(stream); rc != cudaSuccess)
        return failed(std::string("cudaStreamSynchronize before growing the cuDNN attention "
                                  "workspace: ") +
                      cudaGetErrorString(rc));
      cudaFree(workspace);
      workspace = nullptr;
      workspaceBytes = 0;
    }
    if (cudaError_t rc = cudaMalloc(&workspace, bytes); rc != cudaSuccess) {
      cudaGetLastError(); // clear the allocation error: the status says it
      workspace = nullptr;
      std::string text = "cudaMalloc of " + std::to_string(bytes) +
                         " bytes of cuDNN attention workspace: " + cudaGetErrorString(rc);
      // Out of memory is a graph this device cannot afford, not a fault: the
      // deterministic backward on Hopper keeps the whole dS matrix in its
      // workspace (b*h*s*s*2 bytes, 2 GiB at b 8, h 32, s 2048), and the
      // caller then tries the non-deterministic one, or the fp32 kernels.
      return rc == cudaErrorMemoryAllocation ? unsupported(text) : failed(text);
    }
    workspaceBytes = bytes;
    return {};
  }
};

AttentionCudnnContext::AttentionCudnnContext() = default;
AttentionCudnnContext::~AttentionCudnnContext() = default;

AttentionCudnnContext::State *AttentionCudnnContext::state(AttentionCudnnStatus &status) {
  int device = -1;
  if (cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) {
    cudaGetLastError();
    status = failed(std::string("cudaGetDevice: ") + cudaGetErrorString(rc));
    return nullptr;
  }
  if (!state_) {
    auto fresh = std::make_unique<State>();
    fresh->device = device;
    if (cudnnStatus_t rc = cudnnCreate(&fresh->handle); rc != CUDNN_STATUS_SUCCESS) {
      // No usable cuDNN at run time (its libraries, the driver, the GPU):
      // the fp32 kernels still work, so this is Unsupported, and remembered.
      fresh->handle = nullptr;
      fresh->createStatus = unsupported(std::string("cudnnCreate failed (cuDNN ") +
                                        cudnnVersionText() + "): " + cudnnGetErrorString(rc));
    }
    state_ = std::move(fresh);
  }
  if (device != state_->device) {
    status =
        failed("the cuDNN attention context belongs to device " + std::to_string(state_->device) +
               ", not to the current device " + std::to_string(device));
    return nullptr;
  }
  if (!state_->handle) {
    status = state_->createStatus;
    return nullptr;
  }
  status = {};
  return state_.get();
}

bool attentionCudnnBuilt() { return true; }

namespace {

/// The [b, h, s, d] view of a [B, T, heads, D] buffer at token stride `stride`.
fe::graph::Tensor_attributes view(const char *name, int64_t uid, const AttentionCudnnArgs &a,
                                  Index heads, Index stride) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_data_type(fe::DataType_t::BFLOAT16)
      .set_dim({a.batch, heads, a.seq, a.headDim})
      .set_stride({a.seq * stride, a.headDim, stride, 1});
}

void declare(const std::shared_ptr<fe::graph::Tensor_attributes> &t,
             const fe::graph::Tensor_attributes &like) {
  t->set_output(true)
      .set_uid(like.get_uid())
      .set_data_type(like.get_data_type())
      .set_dim(like.get_dim())
      .set_stride(like.get_stride());
}

fe::graph::Tensor_attributes lseView(const AttentionCudnnArgs &a) {
  return fe::graph::Tensor_attributes()
      .set_name("lse")
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({a.batch, a.heads, a.seq, 1})
      .set_stride({a.heads * a.seq, a.seq, 1, 1});
}

/// Describes the forward (backward = false) or backward operation.
void describeGraph(fe::graph::Graph &g, const AttentionCudnnArgs &a, bool backward,
                   bool deterministic) {
  g.set_name(backward ? "mist_attention_bwd" : "mist_attention_fwd")
      .set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  float scale = 1.f / std::sqrt(float(a.headDim));
  auto q = g.tensor(view("q", kQ, a, a.heads, a.qStride));
  auto k = g.tensor(view("k", kK, a, a.kvHeads, a.kvStride));
  auto v = g.tensor(view("v", kV, a, a.kvHeads, a.kvStride));
  const Index rowWidth = a.heads * a.headDim;
  if (!backward) {
    auto attributes = fe::graph::SDPA_attributes()
                          .set_name("sdpa")
                          .set_generate_stats(a.lse != nullptr)
                          .set_attn_scale(scale);
    if (a.causal) // = set_causal_mask(true), spelled without the deprecated setter
      attributes.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(0);
    auto [o, stats] = g.sdpa(q, k, v, attributes);
    declare(o, view("out", kO, a, a.heads, rowWidth));
    if (a.lse)
      declare(stats, lseView(a));
    return;
  }
  auto o = g.tensor(view("out", kO, a, a.heads, rowWidth));
  auto dout = g.tensor(view("dout", kDout, a, a.heads, rowWidth));
  auto stats = g.tensor(lseView(a));
  // The deterministic algorithm (no atomics in the dq accumulation) when
  // the context asks for it, so gradients repeat bit for bit like the fp32
  // kernels'; where cuDNN has none for this configuration the graph is
  // refused and the caller falls back.
  auto attributes = fe::graph::SDPA_backward_attributes()
                        .set_name("sdpa_backward")
                        .set_attn_scale(scale)
                        .set_deterministic_algorithm(deterministic);
  if (a.causal)
    attributes.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0);
  auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dout, stats, attributes);
  declare(dq, view("dq", kDq, a, a.heads, a.qStride));
  declare(dk, view("dk", kDk, a, a.kvHeads, a.kvStride));
  declare(dv, view("dv", kDv, a, a.kvHeads, a.kvStride));
}

/// Errors of CUDA itself while building are real failures; anything else
/// the frontend or cuDNN says while building means "not this configuration".
AttentionCudnnStatus buildVerdict(const char *step, fe::error_t &e) {
  std::string text = std::string("cuDNN ") + cudnnVersionText() + " " + step + ": " + describe(e);
  switch (e.get_code()) {
  case fe::error_code_t::CUDA_API_FAILED:
  case fe::error_code_t::INVALID_CUDA_DEVICE:
  case fe::error_code_t::HANDLE_ERROR:
    return failed(text);
  default:
    return unsupported(text);
  }
}

/// Builds the graph of `a`, or says why it cannot be.
CachedGraph build(const AttentionCudnnArgs &a, bool backward, bool deterministic,
                  cudnnHandle_t handle) {
  CachedGraph out;
  auto graph = std::make_shared<fe::graph::Graph>();
  describeGraph(*graph, a, backward, deterministic);
  if (auto e = graph->validate(); e.is_bad()) {
    out.refusal = buildVerdict("validate", e);
    return out;
  }
  if (auto e = graph->build_operation_graph(handle); e.is_bad()) {
    out.refusal = buildVerdict("build_operation_graph", e);
    return out;
  }
  if (auto e = graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      e.is_bad()) {
    out.refusal = buildVerdict("create_execution_plans", e);
    return out;
  }
  if (auto e = graph->check_support(); e.is_bad()) {
    out.refusal = buildVerdict("check_support", e);
    return out;
  }
  if (auto e = graph->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); e.is_bad()) {
    out.refusal = buildVerdict("build_plans", e);
    return out;
  }
  if (auto e = graph->get_workspace_size(out.workspaceBytes); e.is_bad()) {
    out.refusal = buildVerdict("get_workspace_size", e);
    return out;
  }
  out.graph = std::move(graph);
  return out;
}

AttentionCudnnStatus run(const AttentionCudnnArgs &a, bool backward, cudaStream_t stream,
                         AttentionCudnnContext *ctx) {
  const char *op = backward ? "attentionBwdCudnn: " : "attentionFwdCudnn: ";
  bool empty = false;
  if (AttentionCudnnStatus s = checkArgs(a, backward, empty); !s.ok() || empty)
    return s;
  const void *operands[] = {a.q,
                            a.k,
                            a.v,
                            a.out,
                            backward ? a.dout : nullptr,
                            backward ? a.dq : nullptr,
                            backward ? a.dk : nullptr,
                            backward ? a.dv : nullptr};
  for (const void *p : operands)
    if (!aligned16(p))
      return unsupported(op + std::string("cuDNN needs 16-byte aligned q, k, v, out") +
                         (backward ? ", dout, dq, dk and dv" : ""));

  AttentionCudnnContext &c = ctx ? *ctx : AttentionCudnnContext::processDefault();
  AttentionCudnnStatus status;
  AttentionCudnnContext::State *st = c.state(status);
  if (!st)
    return {status.code(), op + status.message()};

  const bool deterministic = backward && c.deterministicBackward();
  const GraphKey key{backward,  a.batch,    a.seq,    a.heads,          a.kvHeads,    a.headDim,
                     a.qStride, a.kvStride, a.causal, a.lse != nullptr, deterministic};
  auto found = st->graphs.find(key);
  if (found == st->graphs.end())
    found = st->graphs.emplace(key, build(a, backward, deterministic, st->handle)).first;
  CachedGraph &entry = found->second;
  if (!entry.graph)
    return {entry.refusal.code(), op + entry.refusal.message()};

  if (AttentionCudnnStatus s = st->reserve(size_t(entry.workspaceBytes), stream); !s.ok())
    return {s.code(), op + s.message()};
  if (cudnnStatus_t rc = cudnnSetStream(st->handle, stream); rc != CUDNN_STATUS_SUCCESS)
    return failed(op + std::string("cudnnSetStream: ") + cudnnGetErrorString(rc));

  auto ptr = [](const void *p) { return const_cast<void *>(p); };
  std::unordered_map<int64_t, void *> pack{
      {kQ, ptr(a.q)}, {kK, ptr(a.k)}, {kV, ptr(a.v)}, {kO, ptr(a.out)}};
  if (backward) {
    pack.insert({{kStats, a.lse}, {kDout, ptr(a.dout)}, {kDq, a.dq}, {kDk, a.dk}, {kDv, a.dv}});
  } else if (a.lse) {
    pack.insert({kStats, a.lse});
  }
  if (auto e = entry.graph->execute(st->handle, pack, st->workspace); e.is_bad())
    return failed(op + std::string("cuDNN execute: ") + describe(e));
  return {};
}

/// run() with every exception of the frontend (or of the standard library:
/// allocation) turned into Failed.
AttentionCudnnStatus runNoThrow(const AttentionCudnnArgs &a, bool backward, cudaStream_t stream,
                                AttentionCudnnContext *ctx) {
  const char *op = backward ? "attentionBwdCudnn: " : "attentionFwdCudnn: ";
  try {
    return run(a, backward, stream, ctx);
  } catch (const std::exception &e) {
    return failed(op + std::string("exception from the cuDNN frontend: ") + e.what());
  } catch (...) {
    return failed(op + std::string("unknown exception from the cuDNN frontend"));
  }
}

} // namespace

AttentionCudnnStatus attentionFwdCudnn(const AttentionCudnnArgs &a, cudaStream_t stream,
                                       AttentionCudnnContext *ctx) {
  return runNoThrow(a, false, stream, ctx);
}

AttentionCudnnStatus attentionBwdCudnn(const AttentionCudnnArgs &a, cudaStream_t stream,
                                       AttentionCudnnContext *ctx) {
  return runNoThrow(a, true, stream, ctx);
}

#else // !MIST_HAVE_CUDNN

struct AttentionCudnnContext::State {};

AttentionCudnnContext::AttentionCudnnContext() = default;
AttentionCudnnContext::~AttentionCudnnContext() = default;

AttentionCudnnContext::State *AttentionCudnnContext::state(AttentionCudnnStatus &status) {
  status = unsupported("mistc was built without cuDNN");
  return nullptr;
}

bool attentionCudnnBuilt() { return false; }

namespace {

AttentionCudnnStatus stub(const AttentionCudnnArgs &a, bool backward) {
  bool empty = false;
  if (AttentionCudnnStatus s = checkArgs(a, backward, empty); !s.ok())
    return s;
  return unsupported(std::string(backward ? "attentionBwdCudnn" : "attentionFwdCudnn") +
                     ": mistc was built without cuDNN (CMake found no cuDNN or no cuDNN frontend "
                     "headers): the fp32 attention kernels run instead");
}

} // namespace

AttentionCudnnStatus attentionFwdCudnn(const AttentionCudnnArgs &a, cudaStream_t,
                                       AttentionCudnnContext *) {
  return stub(a, false);
}

AttentionCudnnStatus attentionBwdCudnn(const AttentionCudnnArgs &a, cudaStream_t,
                                       AttentionCudnnContext *) {
  return stub(a, true);
}

#endif // MIST_HAVE_CUDNN

AttentionCudnnStatus attentionBwdCudnnAnyAlgorithm(const AttentionCudnnArgs &a, cudaStream_t stream,
                                                   AttentionCudnnContext &ctx, std::string &why) {
  why.clear();
  AttentionCudnnStatus rc = attentionBwdCudnn(a, stream, &ctx);
  if (!rc.unsupported() || !ctx.deterministicBackward())
    return rc;
  // Only a refusal the non-deterministic algorithm does not share makes ctx
  // give up determinism (a misaligned pointer or a head dim cuDNN lacks is
  // refused either way, and the caller falls back to the fp32 kernels).
  ctx.setDeterministicBackward(false);
  AttentionCudnnStatus retry = attentionBwdCudnn(a, stream, &ctx);
  if (retry.ok())
    why = rc.message();
  else
    ctx.setDeterministicBackward(true);
  return retry;
}

} // namespace mist::kernels
