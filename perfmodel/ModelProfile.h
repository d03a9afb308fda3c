//===- ModelProfile.h - A costed module, compiled for the perf model ------===//
/// \file
/// Everything the memory and time models need from a costed, differentiated,
/// tp-sharded module, as polynomials in (b, tp) compiled once:
///  - per op: FLOPs, bytes moved, tp communication bytes, and what sequence
///    parallelism changes (ops it splits along the sequence, the
///    all-gathers it adds);
///  - per region: parameters per rank, and the liveness of activations over
///    its forward then backward ops: bytes kept for backward with and without
///    checkpointing, and the live-byte peaks of forward, checkpointed forward
///    and backward. Peaks are maxima over program points; candidates that
///    another dominates for every b, tp are dropped at build time.
/// RegionNumbers evaluates one region at a concrete (b, tp) on a cluster,
/// with or without sequence parallelism.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "perfmodel/ClusterLinks.h"
#include "perfmodel/Collectives.h"
#include "perfmodel/Poly.h"
#include "support/Diagnostics.h"

namespace mist {

/// An m x n x k matrix product an op runs.
struct GemmShape {
  Poly m, n, k;
};

/// Attention's geometry: batch, sequence and heads per rank, and the
/// kernels it runs (flash, or the score matrix materialized, with dropout).
struct AttentionShape {
  Poly batch, seq, heads;
  bool causal = true;
  bool backward = false;
  bool flash = true;
  bool dropout = false;
};

struct OpProfile {
  OpKind kind;
  Poly flops, bytes, comm;
  double flopDiscount = 1; ///< causal flash attention computes about half the scores
  bool tpCollective = false;
  /// Sequence parallelism (Megatron-LM's, beside tp) splits every activation
  /// tp replicates along the sequence; an op all of whose activations are
  /// such runs on a tp-th of the rows (norms, dropout, residual adds).
  bool splitUnderSp = false;
  /// An all-gather only sequence parallelism runs (nothing without it): in
  /// front of a column-parallel op (forward; `tp_copy`'s place) and of the
  /// gradient of a partial sum's reader (backward). `comm` is its result.
  bool onlyUnderSp = false;
  /// Of those, a backward re-gather of a column-parallel op's input for its
  /// weight gradient (the forward keeps only the split input, as Megatron-LM
  /// does), which runs beside the op's input-gradient GEMM.
  bool besideGemm = false;
  /// A forward op selective recomputation runs again before the backward
  /// (ir/OpSemantics.h, recomputedSelectively; its result is saved).
  bool selectiveRecompute = false;
  std::string name; ///< first result, for measured-table lookups and traces
  std::vector<std::vector<Poly>> operandShapes;
  std::vector<GemmShape> gemms;            ///< linear, lm_head and their gradients
  std::optional<AttentionShape> attention; ///< attention and its gradient
};

/// A region's activation memory, from the liveness of its values; values
/// an op passes through unchanged (forwardsOperand) share their operand's
/// bytes, as in the trainer.
struct RegionMemory {
  Poly savedFull, savedCkpt;     ///< bytes kept for backward
  std::vector<Poly> fwdPeakFull; ///< live bytes at forward program points
  std::vector<Poly> fwdPeakCkpt; ///< same when only the inputs are kept
  std::vector<Poly> bwdPeak;     ///< live bytes at backward program points
  /// Under selective recomputation: what stays saved (the recomputed
  /// results dropped), and the forward's live bytes with those freed after
  /// their last forward use.
  Poly savedSelective;
  std::vector<Poly> fwdPeakSelective;
};

struct RegionProfile {
  Poly params; ///< parameter elements per rank
  /// Elements per rank of parameters this region reads but another region
  /// declares: post's tied embedding, of which a pipeline's last stage
  /// holds a copy of its own (weights, gradients and optimizer state).
  Poly tiedParams;
  /// Without the ops that pass their operand through (they cost nothing).
  std::vector<OpProfile> fwd, bwd;
  /// At tp > 1, and at tp = 1, where all_reduce passes its operand through too.
  RegionMemory memory, memoryAtTp1;
  /// At tp > 1 with sequence parallelism: the replicated activations are a
  /// tp-th, the all-gathered inputs of column-parallel ops whole buffers.
  RegionMemory memorySp;
  Poly gradIn, output;     ///< incoming gradient / output activation bytes
  Poly gradInSp, outputSp; ///< the same under sequence parallelism
  Poly fwdFlops, bwdFlops; ///< matrix FLOPs (from the cost model)
};

/// One region evaluated at (b, tp) on a cluster. Times in seconds, sizes in bytes.
struct RegionNumbers {
  double params = 0;
  double tiedParams = 0; ///< see RegionProfile::tiedParams
  /// Bytes per parameter of the weights (the training dtype), of their
  /// gradients (the gradient dtype: by default the master dtype), and of the
  /// optimizer state: Adam m and v in the master dtype, plus master weights
  /// unless they are the weights (fp32 training). bf16 with fp32 masters:
  /// 2, 4 and 12; fp32: 4, 4 and 8.
  double paramBytes = 2, gradBytes = 4, stateBytes = 12;
  /// The weights are the masters (training in the master dtype, fp32): no
  /// separate copy while they stay whole (see optimizerBytesPerParam).
  bool mastersAreWeights = false;
  double fwdCompute = 0, bwdCompute = 0; ///< kernels, without tp collectives
  double tpFwd = 0, tpBwd = 0;           ///< tp collectives, on the critical path
  /// Of the compute, the GEMMs (linear, lm_head and their gradients): what
  /// tp collectives overlapped with their neighbouring GEMMs hide behind.
  double gemmFwd = 0, gemmBwd = 0;
  /// Sequence parallelism's backward re-gathers (OpProfile::besideGemm),
  /// overlapped with gemmBwd rather than on the critical path.
  double tpBwdBesideGemm = 0;
  double savedFull = 0, savedCkpt = 0;
  double fwdPeakFull = 0, fwdPeakCkpt = 0, bwdPeak = 0;
  /// Selective recomputation (of a layer not checkpointed): its saved bytes
  /// and forward peak, and the seconds of the forward ops it runs again
  /// before the backward.
  double savedSelective = 0, fwdPeakSelective = 0, selectiveRecompute = 0;
  double gradIn = 0, output = 0;
  double fwdFlops = 0, bwdFlops = 0;
};

class ModelProfile {
public:
  /// Needs a module that went through shape-infer, tp-shard, backward and
  /// cost-model; reports what is missing otherwise.
  static std::optional<ModelProfile> build(const Module &m, DiagnosticEngine &diag);

  /// With `sequenceParallel` (it changes nothing at tp = 1), the
  /// replicated part of the region runs split along the sequence and its tp
  /// collectives become reduce-scatters and all-gathers.
  RegionNumbers evaluate(RegionKind r, int b, int tp, const Cluster &c,
                         bool sequenceParallel = false) const;
  /// The (op name, shape key) pairs evaluate(r, b, tp, c) looks up in
  /// c.device.measured, for every region, forward then backward, in op
  /// order (repeats included): what a profiler must measure so that no op
  /// at this (b, tp) falls back to the roofline.
  std::vector<std::pair<std::string, std::string>> measuredLookups(int b, int tp) const;
  const RegionProfile &region(RegionKind r) const {
    return r == RegionKind::Pre ? pre : r == RegionKind::Layer ? layer : post;
  }

  /// The first divisibility assumption of the module that fails at this tp
  /// (as text, e.g. "heads % tp == 0"), if any.
  std::optional<std::string> violatedAssumption(int tp) const;

  std::string modelName;
  /// From the train section's dtypes (RegionNumbers).
  double paramBytes = 2, gradBytes = 4, stateBytes = 12;
  /// `dtype = f32`: its GEMMs run as TF32, so the roofline prices them at
  /// the TF32 peak (DeviceProfile::matmulPeakTflops).
  bool fp32Training = false;
  bool mastersAreWeights = false; ///< RegionNumbers::mastersAreWeights
  int numLayers = 0;
  int64_t seqLen = 0;
  int64_t globalBatch = 0;
  /// Model FLOPs of one sample (fwd + 2 x fwd for backward, no recompute),
  /// the convention behind MFU figures.
  double modelFlopsPerSample = 0;

private:
  RegionProfile pre, layer, post;
  struct Divisibility {
    std::string text;
    Poly dividend, divisor;
  };
  std::vector<Divisibility> assumptions;
};

/// The shape key of `op` at (b, tp) in the measured-op table: its operand
/// shapes, dims joined by 'x', operands by ',' (a scalar is empty), e.g.
/// "8192x2048,2048x6144" (docs/cluster.md, "Roofline and measured ops").
std::string measuredShapeKey(const OpProfile &op, int b, int tp);
/// Whether the time model looks `op` up in the measured table (every op but
/// a forward or backward all_reduce and sequence parallelism's all-gathers,
/// which the collective model prices).
bool looksUpMeasured(const OpProfile &op);

} // namespace mist
