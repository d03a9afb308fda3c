//===- Linear.cu - The linear layer on the GPU with cuBLASLt --------------===//
/// \file
/// Row-major to column-major: cuBLASLt is column-major, and a row-major
/// [r, c] matrix with leading dimension c is the column-major [c, r] matrix
/// with the same leading dimension. So, with every matrix named by its
/// row-major shape,
///   forward  out[N,O]  = x[N,I] W[I,O]   is  outᵀ  = Wᵀ xᵀ        (m=O, n=N, k=I)
///   dinp     dx[N,I]   = dy[N,O] Wᵀ      is  dxᵀ   = (Wᵀ)ᵀ dyᵀ    (m=I, n=N, k=O)
///   dweight  dW[I,O]  += xᵀ dy           is  dWᵀ  += dyᵀ (xᵀ)ᵀ    (m=O, n=I, k=N)
/// where every operand on the right is the column-major view of the buffer
/// as it lies in memory, and `ᵀ` on an operand is CUBLAS_OP_T.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/linear/LinearCuda.h"

#include "stdlib/kernels/activation/ActivationCuda.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

namespace mist::kernels {

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

/// The key of the algorithm cache: everything the heuristic looked at.
using GemmKey = std::array<int64_t, 20>;

struct LinearContext::State {
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The bias gradient's per-chunk column sums, grown stream-ordered
  /// (cudaMallocAsync: no device-wide synchronization mid-step).
  float *biasPartials = nullptr;
  size_t biasPartialsBytes = 0;
  int device = -1;
  /// The heuristic's pick per GEMM, or nullopt where it had none (NOT_SUPPORTED).
  std::map<GemmKey, std::optional<cublasLtMatmulAlgo_t>> algorithms;

  ~State() {
    if (biasPartials)
      cudaFree(biasPartials);
    if (workspace)
      cudaFree(workspace);
    if (handle)
      cublasLtDestroy(handle);
  }
};

LinearContext::LinearContext(LinearMath math, size_t workspaceBytes)
    : math_(math), workspaceBytes_(workspaceBytes) {}

LinearContext::~LinearContext() = default;

LinearContext &LinearContext::processDefault() {
  static LinearContext *context = new LinearContext(); // leaked on purpose, see the header
  return *context;
}

cublasStatus_t LinearContext::state(State *&out) {
  if (!state_) {
    auto fresh = std::make_unique<State>();
    if (cudaGetDevice(&fresh->device) != cudaSuccess)
      return CUBLAS_STATUS_NOT_INITIALIZED;
    if (cublasStatus_t rc = cublasLtCreate(&fresh->handle); rc != CUBLAS_STATUS_SUCCESS)
      return rc;
    if (workspaceBytes_ && cudaMalloc(&fresh->workspace, workspaceBytes_) != cudaSuccess) {
      cudaGetLastError(); // clear the allocation error: the status says it
      return CUBLAS_STATUS_ALLOC_FAILED;
    }
    fresh->workspaceBytes = workspaceBytes_;
    state_ = std::move(fresh);
  } else {
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess || device != state_->device)
      return CUBLAS_STATUS_INVALID_VALUE; // the context belongs to another device
  }
  out = state_.get();
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

//===----------------------------------------------------------------------===//
// Small kernels: bias broadcast and the bias gradient
//===----------------------------------------------------------------------===//

/// out[n, o] = bias ? bias[o] : 0 (out is [rows, cols] row-major).
template <typename T>
__global__ void broadcastBiasKernel(T *out, const T *bias, Index rows, Index cols) {
  Index total = rows * cols;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x)
    out[i] = bias ? bias[i % cols] : T(0.f);
}

template <typename T>
cublasStatus_t broadcastBias(T *out, const T *bias, Index rows, Index cols, cudaStream_t stream) {
  Index total = rows * cols;
  if (total == 0)
    return CUBLAS_STATUS_SUCCESS;
  constexpr int threads = 256;
  Index blocks = (total + threads - 1) / threads;
  if (blocks > 65536)
    blocks = 65536; // the grid-stride loop covers the rest
  broadcastBiasKernel<T><<<unsigned(blocks), threads, 0, stream>>>(out, bias, rows, cols);
  return cudaGetLastError() == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

constexpr int kBiasColumns = 32, kBiasRowLanes = 16;
/// Rows one block of the bias gradient sums: a [16384, 2048] gradient is
/// 64 x 64 blocks, enough to keep every SM's loads in flight (one block per
/// 32 columns over all rows gave 64 blocks: about a tenth of the memory rate).
constexpr Index kBiasRowsPerChunk = 256;

__device__ inline float widen(float x) { return x; }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

/// partials[chunk, o] = Σ_{n in chunk} dout[n, o] (in fp32 whatever dout's
/// type): block (x, y) sums 32 columns over the rows of chunk y; its 16 row
/// lanes each sum a strided subset, then lane 0 adds the 16 in a fixed order.
template <typename DoutT>
__global__ void __launch_bounds__(kBiasColumns *kBiasRowLanes)
    biasGradPartialKernel(float *partials, const DoutT *dout, Index rows, Index cols) {
  __shared__ float lanes[kBiasRowLanes][kBiasColumns];
  const Index col = Index(blockIdx.x) * kBiasColumns + threadIdx.x;
  const Index begin = Index(blockIdx.y) * kBiasRowsPerChunk;
  const Index end = begin + kBiasRowsPerChunk < rows ? begin + kBiasRowsPerChunk : rows;
  float sum = 0.f;
  if (col < cols)
    for (Index n = begin + threadIdx.y; n < end; n += kBiasRowLanes)
      sum += widen(dout[n * cols + col]);
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.f;
    for (int lane = 0; lane < kBiasRowLanes; ++lane)
      total += lanes[lane][threadIdx.x];
    partials[Index(blockIdx.y) * cols + col] = total;
  }
}

/// dbias[o] += Σ_chunk partials[chunk, o], the chunks in order.
__global__ void biasGradFinishKernel(float *dbias, const float *partials, Index chunks,
                                     Index cols) {
  const Index col = Index(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols)
    return;
  float total = 0.f;
  for (Index chunk = 0; chunk < chunks; ++chunk)
    total += partials[chunk * cols + col];
  dbias[col] += total;
}

/// dbias[o] += Σ_n dout[n, o]: per-chunk column sums, then their sum per
/// column in chunk order. Deterministic (no atomics), whatever the grid.
template <typename DoutT>
cublasStatus_t biasGrad(LinearContext::State &s, float *dbias, const DoutT *dout, Index rows,
                        Index cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0)
    return CUBLAS_STATUS_SUCCESS;
  const Index chunks = (rows + kBiasRowsPerChunk - 1) / kBiasRowsPerChunk;
  const Index colBlocks = (cols + kBiasColumns - 1) / kBiasColumns;
  if (chunks > 65535)
    return CUBLAS_STATUS_INVALID_VALUE; // grid.y; 16.7M rows
  const size_t bytes = size_t(chunks * cols) * sizeof(float);
  if (bytes > s.biasPartialsBytes) {
    // Stream-ordered: the old buffer is freed after the work queued on it.
    if (s.biasPartials && cudaFreeAsync(s.biasPartials, stream) != cudaSuccess)
      return CUBLAS_STATUS_EXECUTION_FAILED;
    s.biasPartials = nullptr;
    s.biasPartialsBytes = 0;
    if (cudaMallocAsync(reinterpret_cast<void **>(&s.biasPartials), bytes, stream) != cudaSuccess) {
      cudaGetLastError(); // clear the allocation error: the status says it
      s.biasPartials = nullptr;
      return CUBLAS_STATUS_ALLOC_FAILED;
    }
    s.biasPartialsBytes = bytes;
  }
  biasGradPartialKernel<DoutT>
      <<<dim3(unsigned(colBlocks), unsigned(chunks)), dim3(kBiasColumns, kBiasRowLanes), 0,
         stream>>>(s.biasPartials, dout, rows, cols);
  constexpr int finishThreads = 256;
  biasGradFinishKernel<<<unsigned((cols + finishThreads - 1) / finishThreads), finishThreads, 0,
                         stream>>>(dbias, s.biasPartials, chunks, cols);
  return cudaGetLastError() == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

//===----------------------------------------------------------------------===//
// One cuBLASLt GEMM: D = alpha op(A) op(B) + beta C (+ bias), D aliases C
//===----------------------------------------------------------------------===//

struct Gemm {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr, *b = nullptr;
  void *c = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t typeAB = CUDA_R_32F, typeC = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  float beta = 0.f;
  const void *bias = nullptr; ///< [m] of typeC, through CUBLASLT_EPILOGUE_BIAS
  /// GELU epilogues: Forward stores gelu(D) in D and the pre-activation in
  /// `aux`; Backward multiplies D by gelu'(aux). aux has C's type and
  /// layout (leading dimension ldc).
  enum class Gelu { None, Forward, Backward } gelu = Gelu::None;
  void *aux = nullptr;
};

size_t elementBytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

/// The largest power of two (at most 256, cuBLASLt's default assumption)
/// dividing both the address and the leading dimension in bytes.
uint32_t alignmentOf(const void *p, int64_t ld, cudaDataType_t type) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | (uint64_t(ld) * elementBytes(type));
  uint32_t align = 256;
  while (align > 1 && bits % align)
    align /= 2;
  return align;
}

/// Destroys cuBLASLt descriptors at scope exit.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors &) = delete;
  Descriptors &operator=(const Descriptors &) = delete;
  ~Descriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

#define MIST_LT_TRY(call)                                                                          \
  do {                                                                                             \
    cublasStatus_t rc_ = (call);                                                                   \
    if (rc_ != CUBLAS_STATUS_SUCCESS)                                                              \
      return rc_;                                                                                  \
  } while (0)

/// Builds the descriptors of `g`, with the bias epilogue when `withBias`
/// (and g's GELU epilogue, if any).
cublasStatus_t describe(const Gemm &g, bool withBias, Descriptors &d) {
  MIST_LT_TRY(cublasLtMatmulDescCreate(&d.op, g.compute, CUDA_R_32F));
  int32_t transA = g.transA, transB = g.transB;
  MIST_LT_TRY(
      cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof transA));
  MIST_LT_TRY(
      cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof transB));
  if (g.gelu != Gemm::Gelu::None) {
    uint32_t epilogue = g.gelu == Gemm::Gelu::Backward ? CUBLASLT_EPILOGUE_DGELU
                        : withBias                     ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                       : CUBLASLT_EPILOGUE_GELU_AUX;
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                               sizeof epilogue));
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                               &g.aux, sizeof g.aux));
    int64_t auxLd = g.ldc;
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &auxLd,
                                               sizeof auxLd));
    int32_t auxType = g.typeC;
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                               &auxType, sizeof auxType));
  }
  if (withBias) {
    if (g.gelu == Gemm::Gelu::None) {
      uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                 sizeof epilogue));
    }
    int32_t biasType = g.typeC;
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                                               sizeof biasType));
    MIST_LT_TRY(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                               sizeof g.bias));
  }
  // Stored shapes: op(A) is m x k, op(B) is k x n, C is m x n (column-major).
  bool ta = g.transA != CUBLAS_OP_N, tb = g.transB != CUBLAS_OP_N;
  MIST_LT_TRY(cublasLtMatrixLayoutCreate(&d.a, g.typeAB, ta ? g.k : g.m, ta ? g.m : g.k, g.lda));
  MIST_LT_TRY(cublasLtMatrixLayoutCreate(&d.b, g.typeAB, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb));
  MIST_LT_TRY(cublasLtMatrixLayoutCreate(&d.c, g.typeC, g.m, g.n, g.ldc));
  return CUBLAS_STATUS_SUCCESS;
}

/// Picks (and caches) an algorithm for `g`; NOT_SUPPORTED if there is none.
cublasStatus_t chooseAlgorithm(LinearContext::State &s, const Gemm &g, bool withBias,
                               const Descriptors &d, cublasLtMatmulAlgo_t &algo) {
  uint32_t alignA = alignmentOf(g.a, g.lda, g.typeAB), alignB = alignmentOf(g.b, g.ldb, g.typeAB),
           alignC = alignmentOf(g.c, g.ldc, g.typeC),
           alignBias = withBias ? alignmentOf(g.bias, 0, g.typeC) : 256;
  const uint32_t alignAux = g.gelu != Gemm::Gelu::None ? alignmentOf(g.aux, g.ldc, g.typeC) : 256;
  GemmKey key{g.transA,        g.transB, g.m,      g.n,     g.k,       g.lda,
              g.ldb,           g.ldc,    g.typeAB, g.typeC, g.compute, g.beta != 0.f,
              withBias,        alignA,   alignB,   alignC,  alignBias, int64_t(s.workspaceBytes),
              int64_t(g.gelu), alignAux};
  if (auto it = s.algorithms.find(key); it != s.algorithms.end()) {
    if (!it->second)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    algo = *it->second;
    return CUBLAS_STATUS_SUCCESS;
  }
  Descriptors p;
  MIST_LT_TRY(cublasLtMatmulPreferenceCreate(&p.preference));
  uint64_t workspace = s.workspaceBytes;
  MIST_LT_TRY(cublasLtMatmulPreferenceSetAttribute(
      p.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
  for (const auto &[attribute, value] : alignments)
    MIST_LT_TRY(
        cublasLtMatmulPreferenceSetAttribute(p.preference, attribute, &value, sizeof value));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(s.handle, d.op, d.a, d.b, d.c, d.c,
                                                     p.preference, 1, &result, &found);
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED || (rc == CUBLAS_STATUS_SUCCESS && found == 0) ||
      (rc == CUBLAS_STATUS_SUCCESS && result.state != CUBLAS_STATUS_SUCCESS)) {
    s.algorithms.emplace(key, std::nullopt); // remembered: no algorithm for this GEMM
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  MIST_LT_TRY(rc);
  algo = result.algo;
  s.algorithms.emplace(key, algo);
  return CUBLAS_STATUS_SUCCESS;
}

/// Runs `g` on `stream`. A bias goes through the cuBLASLt epilogue; should
/// no algorithm support that epilogue for the shape (and beta be 0), the
/// bias is first broadcast into D and the GEMM runs without the epilogue
/// and with beta = 1: still one rounding of the fp32 sum, even in bf16.
template <typename CType>
cublasStatus_t gemm(LinearContext &ctx, const Gemm &g, cudaStream_t stream) {
  LinearContext::State *s = nullptr;
  MIST_LT_TRY(ctx.state(s));
  // cuBLASLt's GELU auxiliary matrix: a leading dimension divisible by 8 and
  // (in practice) 16-byte alignment; otherwise the caller runs it unfused.
  if (g.gelu != Gemm::Gelu::None &&
      (g.ldc % 8 != 0 || reinterpret_cast<uintptr_t>(g.aux) % 16 != 0))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Gemm run = g;
  Descriptors d;
  MIST_LT_TRY(describe(run, run.bias != nullptr, d));
  cublasLtMatmulAlgo_t algo;
  cublasStatus_t rc = chooseAlgorithm(*s, run, run.bias != nullptr, d, algo);
  Descriptors plain;
  const Descriptors *use = &d;
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED && run.bias && run.beta == 0.f &&
      run.gelu == Gemm::Gelu::None) {
    run.beta = 1.f;
    run.bias = nullptr;
    MIST_LT_TRY(describe(run, false, plain));
    MIST_LT_TRY(chooseAlgorithm(*s, run, false, plain, algo));
    // D is [m, n] column-major: a row-major [n, m] matrix, one bias[m] a row.
    MIST_LT_TRY(broadcastBias<CType>(static_cast<CType *>(g.c), static_cast<const CType *>(g.bias),
                                     g.n, g.m, stream));
    use = &plain;
    rc = CUBLAS_STATUS_SUCCESS;
  }
  MIST_LT_TRY(rc);
  const float alpha = 1.f, beta = run.beta;
  return cublasLtMatmul(s->handle, use->op, &alpha, run.a, use->a, run.b, use->b, &beta, run.c,
                        use->c, run.c, use->c, &algo, s->workspace, s->workspaceBytes, stream);
}

bool badSizes(Index rows, Index in, Index outFeatures) {
  return rows < 0 || in < 0 || outFeatures < 0;
}

cublasComputeType_t fp32Compute(const LinearContext &ctx) {
  return ctx.math() == LinearMath::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

template <typename T> constexpr cudaDataType_t cudaTypeOf() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

/// The forward of any type: out[N,O] = x[N,I] W[I,O] + bias.
/// With `geluPreact`, out = gelu(x W + bias) and geluPreact = x W + bias
/// (cuBLASLt's GELU_AUX epilogue; NOT_SUPPORTED when it has no algorithm).
template <typename OutT>
cublasStatus_t forward(LinearContext &ctx, OutT *out, const void *inp, const void *weight,
                       const OutT *bias, Index rows, Index in, Index outFeatures,
                       cudaDataType_t typeAB, cublasComputeType_t compute, cudaStream_t stream,
                       OutT *geluPreact = nullptr) {
  if (badSizes(rows, in, outFeatures) || (rows && outFeatures && !out) ||
      (rows && in && outFeatures && (!inp || !weight)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (rows == 0 || outFeatures == 0)
    return CUBLAS_STATUS_SUCCESS;
  if (in == 0 && geluPreact) // an empty sum: no GEMM to carry the epilogue
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (in == 0) // an empty sum: out = bias (cuBLASLt rejects k = 0)
    return broadcastBias<OutT>(out, bias, rows, outFeatures, stream);
  Gemm g;
  g.m = outFeatures, g.n = rows, g.k = in;
  g.a = weight, g.lda = outFeatures;
  g.b = inp, g.ldb = in;
  g.c = out, g.ldc = outFeatures;
  g.typeAB = typeAB;
  g.typeC = cudaTypeOf<OutT>();
  g.compute = compute;
  g.bias = bias;
  if (geluPreact) {
    g.gelu = Gemm::Gelu::Forward;
    g.aux = geluPreact;
  }
  return gemm<OutT>(ctx, g, stream);
}

/// The backward of any type (Args: LinearArgs or LinearBf16Args): T is the
/// activations' and weight's type, dweight and dbias are fp32.
/// With `geluPreact`, dinp is multiplied by gelu'(geluPreact) in the GEMM's
/// epilogue (DGELU; NOT_SUPPORTED, with nothing run, when it has none).
template <typename Args>
cublasStatus_t backward(LinearContext &c, const Args &a, cublasComputeType_t compute,
                        cudaStream_t stream, const void *geluPreact = nullptr) {
  using T = std::remove_const_t<std::remove_pointer_t<decltype(a.inp)>>;
  const Index N = a.rows, I = a.in, O = a.outFeatures;
  if (badSizes(N, I, O))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool any = N && I && O;
  if ((any && !a.dout) || (any && a.dinp && !a.weight) || (any && a.dweight && !a.inp) ||
      (N && O && a.dbias && !a.dout))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (geluPreact && (!a.dinp || !N || !I || !O))
    return CUBLAS_STATUS_NOT_SUPPORTED; // no dinp GEMM to carry the epilogue
  if (a.dinp && N && I) {
    if (O == 0) { // an empty sum
      if (cudaMemsetAsync(a.dinp, 0, size_t(N * I) * sizeof(T), stream) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    } else { // dxᵀ[I,N] = op_T(W as col-major [O,I]) dyᵀ[O,N]
      Gemm g;
      g.transA = CUBLAS_OP_T;
      g.m = I, g.n = N, g.k = O;
      g.a = a.weight, g.lda = O;
      g.b = a.dout, g.ldb = O;
      g.c = a.dinp, g.ldc = I;
      g.typeAB = g.typeC = cudaTypeOf<T>();
      g.compute = compute;
      if (geluPreact) {
        g.gelu = Gemm::Gelu::Backward;
        g.aux = const_cast<void *>(geluPreact);
      }
      MIST_LT_TRY(gemm<T>(c, g, stream));
    }
  }
  if (any && a.dweight) { // dWᵀ[O,I] += dyᵀ[O,N] op_T(x as col-major [I,N])
    Gemm g;
    g.transB = CUBLAS_OP_T;
    g.m = O, g.n = I, g.k = N;
    g.a = a.dout, g.lda = O;
    g.b = a.inp, g.ldb = I;
    g.c = a.dweight, g.ldc = O;
    g.typeAB = cudaTypeOf<T>();
    g.typeC = CUDA_R_32F;
    g.compute = compute;
    g.beta = 1.f;
    MIST_LT_TRY(gemm<float>(c, g, stream));
  }
  if (a.dbias && N && O) {
    LinearContext::State *s = nullptr;
    MIST_LT_TRY(c.state(s));
    return biasGrad(*s, a.dbias, a.dout, N, O, stream);
  }
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

cublasStatus_t linearFwdCuda(const LinearArgs &a, cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return forward<float>(c, a.out, a.inp, a.weight, a.bias, a.rows, a.in, a.outFeatures, CUDA_R_32F,
                        fp32Compute(c), stream);
}

cublasStatus_t linearBwdCuda(const LinearArgs &a, cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return backward(c, a, fp32Compute(c), stream);
}

cublasStatus_t linearFwdCuda(const LinearBf16Args &a, cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return forward<__nv_bfloat16>(c, a.out, a.inp, a.weight, a.bias, a.rows, a.in, a.outFeatures,
                                CUDA_R_16BF, CUBLAS_COMPUTE_32F, stream);
}

cublasStatus_t linearBwdCuda(const LinearBf16Args &a, cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return backward(c, a, CUBLAS_COMPUTE_32F, stream);
}

cublasStatus_t linearGeluFwdCuda(const LinearBf16Args &a, __nv_bfloat16 *preact,
                                 cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  if (!preact && a.rows && a.outFeatures)
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t rc =
      forward<__nv_bfloat16>(c, a.out, a.inp, a.weight, a.bias, a.rows, a.in, a.outFeatures,
                             CUDA_R_16BF, CUBLAS_COMPUTE_32F, stream, preact);
  if (rc != CUBLAS_STATUS_NOT_SUPPORTED)
    return rc;
  // No GELU epilogue for this GEMM: the linear layer, then the GELU kernel.
  LinearBf16Args plain = a;
  plain.out = preact;
  MIST_LT_TRY(linearFwdCuda(plain, stream, &c));
  return geluFwdCuda(ElementwiseBf16Args{a.out, preact, nullptr, nullptr, nullptr, nullptr,
                                         a.rows * a.outFeatures},
                     stream) == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t linearBwdDgeluCuda(const LinearBf16Args &a, const __nv_bfloat16 *preact,
                                  __nv_bfloat16 *dact, cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  if (!preact && a.dinp && a.rows && a.in)
    return CUBLAS_STATUS_INVALID_VALUE;
  // dweight and dbias read inp and dout only: the plain backward without dinp.
  LinearBf16Args params = a;
  params.dinp = nullptr;
  MIST_LT_TRY(backward(c, params, CUBLAS_COMPUTE_32F, stream));
  if (!a.dinp)
    return CUBLAS_STATUS_SUCCESS;
  LinearBf16Args grad = a;
  grad.dweight = nullptr;
  grad.dbias = nullptr;
  cublasStatus_t rc = backward(c, grad, CUBLAS_COMPUTE_32F, stream, preact);
  if (rc != CUBLAS_STATUS_NOT_SUPPORTED)
    return rc;
  // No DGELU epilogue for this GEMM: dact = dout Wᵀ, then the GELU gradient.
  if (!dact)
    return CUBLAS_STATUS_INVALID_VALUE;
  grad.dinp = dact;
  MIST_LT_TRY(backward(c, grad, CUBLAS_COMPUTE_32F, stream));
  return geluBwdCuda(
             ElementwiseBf16Args{nullptr, preact, nullptr, a.dinp, nullptr, dact, a.rows * a.in},
             stream) == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t linearFwdBf16Cuda(float *out, const __nv_bfloat16 *inp, const __nv_bfloat16 *weight,
                                 const float *bias, Index rows, Index in, Index outFeatures,
                                 cudaStream_t stream, LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return forward<float>(c, out, inp, weight, bias, rows, in, outFeatures, CUDA_R_16BF,
                        CUBLAS_COMPUTE_32F, stream);
}

cublasStatus_t linearFwdBf16Cuda(__nv_bfloat16 *out, const __nv_bfloat16 *inp,
                                 const __nv_bfloat16 *weight, const __nv_bfloat16 *bias, Index rows,
                                 Index in, Index outFeatures, cudaStream_t stream,
                                 LinearContext *ctx) {
  LinearContext &c = ctx ? *ctx : LinearContext::processDefault();
  return forward<__nv_bfloat16>(c, out, inp, weight, bias, rows, in, outFeatures, CUDA_R_16BF,
                                CUBLAS_COMPUTE_32F, stream);
}

} // namespace mist::kernels
