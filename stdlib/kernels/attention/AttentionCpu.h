//===- AttentionCpu.h - Blocked causal attention, fast on CPUs ------------===//
/// \file
/// The reference's contract (Attention.h: strided q, k, v, GQA, the saved
/// log-sum-exp, dq/dk/dv written) computed a block of query rows at a time
/// with cpu::gemm: the scores of a block against the keys it sees, an exact
/// row softmax, then one GEMM for the output. Memory is one
/// [block, seq] score tile per thread, never [seq, seq] per head. The
/// backward recomputes the probabilities from the log-sum-exp as flash
/// attention does and splits work by (batch, key/value head), so dk and dv
/// accumulate in one thread in a fixed order.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/attention/Attention.h"

namespace mist::kernels {

void attentionFwdCpu(const AttentionArgs &a);
void attentionBwdCpu(const AttentionArgs &a);

} // namespace mist::kernels
