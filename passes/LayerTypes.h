//===- LayerTypes.h - The repeated layer keeps the types it carries -------===//
/// \file
/// The layer region runs `repeat` times, each run taking what the last one
/// yielded, so it must map the values it carries to values of the same
/// types. shape-infer checks it, and so do the passes that retype the layer
/// (tp-shard, sequence-parallel), each before post is retyped, so that the
/// error points into the layer rather than at the first op of post that
/// the wrong type upsets.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "support/LogicalResult.h"

namespace mist {

/// Reports the first carried value the layer changes, at the op that makes
/// it: "<who> turns '%x.1' of type T into U; a layer must keep the types it
/// carries" (plus a hint when a column-parallel op has no row-parallel
/// partner). Values without a type yet are left to the verifier.
LogicalResult checkLayerKeepsTypes(const Module &m, DiagnosticEngine &diag, const std::string &who);

} // namespace mist
