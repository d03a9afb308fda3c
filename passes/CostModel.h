//===- CostModel.h - Symbolic per-op and per-region costs -----------------===//
/// \file
/// The cost of an op per micro-batch, symbolic in the module's symbols:
///   flops  matrix-multiply FLOPs (dense, non-causal attention: the Megatron
///          convention used for MFU; elementwise work shows up as bytes)
///   read / write  bytes of operands / results
///   saved  bytes of activations the forward op keeps for its backward
///   comm   bytes each rank contributes to a collective
/// Region summaries add them up (one layer for the repeated region); the
/// saved total counts each kept value once.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"

namespace mist {

OpCost computeOpCost(const Op &op);
RegionSummary summarizeRegion(const Region &r);

} // namespace mist
