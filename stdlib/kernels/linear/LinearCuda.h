//===- LinearCuda.h - out = x W + bias on the GPU (cuBLASLt) --------------===//
/// \file
/// The CUDA version of linearFwdRef / linearBwdRef: the same LinearArgs, all
/// pointers device memory, same semantics (W is [in, out] row-major; the
/// backward writes dinp (`=`, skipped when null) and accumulates dweight and
/// dbias (`+=`, dbias skipped when null)). Every GEMM is one cublasLtMatmul
/// on row-major data through the transpose trick (a row-major [r, c] matrix
/// is a column-major [c, r] one), so nothing is copied or transposed.
///
/// Errors: every entry point returns a cublasStatus_t and never aborts.
/// CUBLAS_STATUS_INVALID_VALUE for bad sizes or null operands, or for a context
/// used on another device than its own, CUBLAS_STATUS_ALLOC_FAILED when
/// the context could not allocate its workspace, CUBLAS_STATUS_NOT_SUPPORTED
/// when cuBLASLt has no algorithm for the shape, CUBLAS_STATUS_EXECUTION_FAILED
/// when one of this file's own small kernels failed to launch (the CUDA error
/// is then left for cudaGetLastError). cublasLtGetStatusString names them.
/// Launches are asynchronous on `stream`; errors of the running kernels show
/// up at the next synchronisation, as always in CUDA.
///
/// Precision: fp32 data use CUBLAS_COMPUTE_32F by default (exact fp32, the
/// tests compare with the CPU reference tightly). A context created with
/// LinearMath::Tf32 uses CUBLAS_COMPUTE_32F_FAST_TF32 instead (tensor cores,
/// 10-bit mantissa products, fp32 accumulation: about 1e-3 relative error).
/// bf16 plans run the LinearBf16Args overloads: bf16 operands, fp32
/// accumulation, fp32 weight and bias gradients.
///
/// Plain C++ can include this header (it needs the CUDA include directories,
/// which linking mistKernelsCuda provides).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/linear/Linear.h"

#include <cstddef>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <memory>

namespace mist::kernels {

/// Which tensor-core math fp32 GEMMs may use (bf16 GEMMs always accumulate
/// in fp32 and are unaffected).
enum class LinearMath {
  Fp32, ///< CUBLAS_COMPUTE_32F: exact fp32 (the default)
  Tf32, ///< CUBLAS_COMPUTE_32F_FAST_TF32: tf32 tensor cores, fp32 accumulation
};

/// Owns the cuBLASLt handle, a GEMM workspace and a cache of the algorithms
/// the cuBLASLt heuristic picked per shape.
///
/// Lifetime: constructing one is free; the handle and the workspace are
/// created on first use, on the device current at that moment, and belong to
/// that device; the destructor frees them (it must run while the CUDA
/// runtime is still alive, i.e. not from a static destructor after
/// cudaDeviceReset). A context is not thread-safe and its one workspace must
/// not be used by two GEMMs at once: use one context per stream (or
/// serialise the streams). Passing no context to the entry points uses
/// LinearContext::processDefault(), one process-wide context meant for a
/// process that drives one GPU from one stream; it is never destroyed (it
/// leaks at exit on purpose, so no destructor races the CUDA runtime's).
class LinearContext {
public:
  /// cuBLAS recommends 32 MiB of workspace on Hopper (4 MiB suffices on Ampere).
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

  explicit LinearContext(LinearMath math = LinearMath::Fp32,
                         size_t workspaceBytes = kDefaultWorkspaceBytes);
  ~LinearContext();
  LinearContext(const LinearContext &) = delete;
  LinearContext &operator=(const LinearContext &) = delete;

  /// The context used when an entry point is given none (see above).
  static LinearContext &processDefault();

  LinearMath math() const { return math_; }
  void setMath(LinearMath math) { math_ = math; }

  struct State; ///< handle, workspace and algorithm cache (LinearCuda.cu)
  /// Creates the handle and workspace on first call.
  cublasStatus_t state(State *&out);

private:
  LinearMath math_;
  size_t workspaceBytes_;
  std::unique_ptr<State> state_;
};

/// out = inp weight + bias.
cublasStatus_t linearFwdCuda(const LinearArgs &a, cudaStream_t stream,
                             LinearContext *ctx = nullptr);
/// dinp = dout weightᵀ (if dinp), dweight += inpᵀ dout (one GEMM with beta = 1; skipped
/// when dweight is null, which the reference does not allow), dbias += Σ_rows dout (if
/// dbias; a small deterministic kernel, not a cuBLASLt epilogue, which would overwrite).
cublasStatus_t linearBwdCuda(const LinearArgs &a, cudaStream_t stream,
                             LinearContext *ctx = nullptr);

/// The linear layer of a bf16 plan: bf16 activations, weights and bias, fp32
/// gradients of the weight and bias (the default grad_dtype), fp32
/// accumulation in every GEMM (CUBLAS_COMPUTE_32F, whatever the context's
/// LinearMath). The same contract as LinearArgs; bf16 outputs (out, dinp)
/// are rounded once, after the fp32 sum (and the bias).
struct LinearBf16Args {
  __nv_bfloat16 *out;          ///< [N, Out]
  const __nv_bfloat16 *inp;    ///< [N, In]
  const __nv_bfloat16 *weight; ///< [In, Out]
  const __nv_bfloat16 *bias;   ///< [Out] or null
  __nv_bfloat16 *dinp;         ///< [N, In], = in backward (may be null)
  float *dweight;              ///< [In, Out], += in backward (may be null)
  float *dbias;                ///< [Out], += in backward (may be null)
  const __nv_bfloat16 *dout;   ///< [N, Out]
  Index rows, in, outFeatures;
};

/// out = inp weight + bias, the bias through the cuBLASLt epilogue.
cublasStatus_t linearFwdCuda(const LinearBf16Args &a, cudaStream_t stream,
                             LinearContext *ctx = nullptr);

/// dinp = dout weightᵀ (bf16, if dinp), dweight += inpᵀ dout (bf16 operands,
/// an fp32 C with beta = 1, if dweight), dbias += Σ_rows dout (fp32 sums of
/// the bf16 rows, the fp32 path's deterministic kernel, if dbias).
cublasStatus_t linearBwdCuda(const LinearBf16Args &a, cudaStream_t stream,
                             LinearContext *ctx = nullptr);

/// The first linear layer of a GPT MLP and its GELU (tanh approximation) in
/// one GEMM: out = gelu(inp weight + bias), preact = inp weight + bias
/// (cuBLASLt's GELU_AUX_BIAS epilogue; the backward reads preact). The GELU
/// is taken of the fp32 sum and both outputs are rounded once. Where
/// cuBLASLt has no such epilogue for the shape, the plain GEMM writes preact
/// and the GELU kernel reads it (the GELU of the rounded sum).
cublasStatus_t linearGeluFwdCuda(const LinearBf16Args &a, __nv_bfloat16 *preact,
                                 cudaStream_t stream, LinearContext *ctx = nullptr);

/// The backward of a linear layer whose input was gelu(preact), with that
/// GELU's backward: dweight, dbias as linearBwdCuda; dinp receives
/// d(preact) = gelu'(preact) · (dout weightᵀ), the product's fp32 value
/// times gelu' rounded once (cuBLASLt's DGELU epilogue). Without such an
/// epilogue, dout weightᵀ goes to `dact` (bf16, [N, In]; then required) and
/// the GELU gradient kernel reads it.
cublasStatus_t linearBwdDgeluCuda(const LinearBf16Args &a, const __nv_bfloat16 *preact,
                                  __nv_bfloat16 *dact, cudaStream_t stream,
                                  LinearContext *ctx = nullptr);

/// A bare bf16 GEMM for the profiler: bf16 inp [rows, in] and weight
/// [in, outFeatures] (row-major, as in LinearArgs), fp32 accumulation, fp32
/// output. The bias, if any, has the output's type (cuBLASLt's rule for its
/// bias epilogue).
cublasStatus_t linearFwdBf16Cuda(float *out, const __nv_bfloat16 *inp, const __nv_bfloat16 *weight,
                                 const float *bias, Index rows, Index in, Index outFeatures,
                                 cudaStream_t stream, LinearContext *ctx = nullptr);

/// The same with a bf16 output (rounded once, after the fp32 accumulation
/// and the bias) and a bf16 bias: linearFwdCuda(LinearBf16Args) without the
/// struct.
cublasStatus_t linearFwdBf16Cuda(__nv_bfloat16 *out, const __nv_bfloat16 *inp,
                                 const __nv_bfloat16 *weight, const __nv_bfloat16 *bias, Index rows,
                                 Index in, Index outFeatures, cudaStream_t stream,
                                 LinearContext *ctx = nullptr);

} // namespace mist::kernels
