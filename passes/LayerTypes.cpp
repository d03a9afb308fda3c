//===- LayerTypes.cpp - The repeated layer keeps the types it carries -----===//
#include "passes/LayerTypes.h"

using namespace mist;

LogicalResult mist::checkLayerKeepsTypes(const Module &m, DiagnosticEngine &diag,
                                         const std::string &who) {
  const Block &layer = m.layer.fwd;
  for (size_t i = 0; i < layer.args.size() && i < layer.yields.size(); ++i) {
    const Value *in = layer.args[i].get(), *out = layer.yields[i];
    if (!in->typed || !out->typed || in->type.equals(out->type))
      continue;
    const bool lastAxisSplit =
        out->type.isSharded() && !in->type.isSharded() && !out->type.isTokenSplit();
    const std::string hint =
        lastAxisSplit ? " (a column-parallel linear must be followed by a row-parallel one)" : "";
    diag.error(out->def ? out->def->loc : llvm::SMLoc(),
               who + " turns '%" + in->name + "' of type " + in->type.str(m.symbols) + " into " +
                   out->type.str(m.symbols) + "; a layer must keep the types it carries" + hint);
    return failure();
  }
  return success();
}
