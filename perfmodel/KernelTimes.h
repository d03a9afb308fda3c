//===- KernelTimes.h - Time of a GEMM or a flash attention from its shape -===//
/// \file
/// The shape model of the two kinds of kernel that hold most of a
/// transformer's FLOPs (docs/perf-model.md, "Kernels"):
///  - a GEMM runs as output tiles, one per SM at a time, in waves: a tile
///    count just above a multiple of the SM count wastes most of a wave,
///    and dimensions that are not multiples of the tile waste part of each
///    edge tile; a full wave of full tiles runs at the device's matmul
///    efficiency. Small GEMMs are bound by memory (the op's bytes);
///  - attention without flash is priced by its FLOPs at the matmul rate
///    plus the traffic of its score matrix (scoreMatrixBytes);
///  - flash attention runs one block of 128 queries per SM at a time, each
///    sweeping its key range: the efficiency grows with the key range as
///    keys / (keys + halfKeys) (the per-block fixed work amortized), and
///    waves quantize as for GEMMs.
/// A device without `sms` keeps the flat roofline: every GEMM at the
/// matmul efficiency.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

namespace mist {

/// Compute-bound seconds of an m x n x k GEMM (2mnk FLOPs) at `flopRate`
/// FLOP/s for a full wave of full tiles, on the device's SMs and tile (and
/// the tile transposed, whichever is faster, as cuBLAS chooses).
double gemmComputeSeconds(const DeviceProfile &d, double flopRate, double m, double n, double k);

/// Fraction of the SMs' capacity the waves of `blocks` equal blocks use.
double waveEfficiency(double blocks, int sms);

/// Flash attention over `batch` x `heads` (per rank) sequences of `seq`
/// tokens: the efficiency (of the matmul peak) of the forward or of the
/// backward, or 0 when the device has no attention figures.
double attentionEfficiency(const DeviceProfile &d, double batch, double heads, double seq,
                           bool causal, bool backward);

/// Bytes that attention without flash moves through its score matrix
/// (batch x heads x seq x seq elements) between its kernels, as Megatron-LM
/// runs it: forward, QK^T writes the scores, the fused scale-mask-softmax
/// reads them and writes probabilities, dropout reads those and writes the
/// kept ones and a one-byte mask, and the product with V reads them (6
/// passes, 4 without dropout); backward, the product's gradient reads the
/// probabilities and writes their gradient, dropout's gradient reads it and
/// the mask and writes, the softmax gradient reads probabilities and
/// gradient and writes, and QK^T's gradient reads the result (8 passes, 6
/// without dropout).
double scoreMatrixBytes(double batch, double heads, double seq, double elementBytes, bool dropout,
                        bool backward);

} // namespace mist
