//===- Builtins.cpp - Signatures of the language's built-in ops -----------===//
#include "frontend/Builtins.h"

#include "llvm/ADT/SmallVector.h"

using namespace mist;

llvm::StringRef mist::argKindName(ArgKind k) {
  switch (k) {
  case ArgKind::Tensor:
    return "tensor";
  case ArgKind::Dim:
    return "size";
  case ArgKind::Offset:
    return "size or 0";
  case ArgKind::Real:
    return "real number";
  case ArgKind::Bool:
    return "boolean";
  case ArgKind::Word:
    return "word";
  }
  return "?";
}

namespace {

BuiltinParam tensor(const char *name, bool required = true) {
  return {name, ArgKind::Tensor, required};
}
BuiltinParam dim(const char *name, bool required = true) { return {name, ArgKind::Dim, required}; }
BuiltinParam offset(const char *name) { return {name, ArgKind::Offset, true}; }
BuiltinParam real(const char *name, double dflt) { return {name, ArgKind::Real, false, dflt}; }
BuiltinParam realRequired(const char *name) { return {name, ArgKind::Real, true}; }
BuiltinParam flag(const char *name, bool dflt) { return {name, ArgKind::Bool, false, 0, dflt}; }
BuiltinParam word(const char *name, const char *dflt, const char *words) {
  return {name, ArgKind::Word, false, 0, false, dflt, words};
}

const std::vector<Builtin> &table() {
  static const std::vector<Builtin> builtins = {
      {"embedding",
       OpKind::Embedding,
       3,
       {tensor("ids"), dim("rows"), dim("dim"), word("shard", "none", "none,vocab")}},
      {"position_embedding", OpKind::PositionEmbedding, 2, {dim("len"), dim("dim")}},
      {"layernorm", OpKind::LayerNorm, 1, {tensor("x"), real("eps", 1e-5), flag("bias", true)}},
      {"rmsnorm", OpKind::RMSNorm, 1, {tensor("x"), real("eps", 1e-6)}},
      {"linear",
       OpKind::Linear,
       2,
       {tensor("x"), dim("out"), word("shard", "none", "none,column,row"), flag("bias", true)}},
      {"lm_head",
       OpKind::LMHead,
       2,
       {tensor("x"), dim("vocab"), word("shard", "vocab", "none,vocab"), flag("tied", false)}},
      {"attention",
       OpKind::Attention,
       3,
       {tensor("q"), tensor("k", false), tensor("v", false), dim("heads"), dim("kv_heads", false),
        dim("head_dim"), flag("causal", true), flag("flash", true), real("dropout", 0.0)}},
      {"rope",
       OpKind::Rope,
       1,
       {tensor("x"), dim("heads"), dim("head_dim"), real("theta", 10000.0),
        dim("rotary_dim", false)}},
      {"gelu", OpKind::Gelu, 1, {tensor("x"), flag("approximate", true)}},
      {"silu", OpKind::Silu, 1, {tensor("x")}},
      {"dropout", OpKind::Dropout, 1, {tensor("x"), realRequired("p")}},
      {"slice", OpKind::Slice, 3, {tensor("x"), offset("start"), dim("size")}},
      {"concat", OpKind::Concat, 2, {tensor("a"), tensor("b")}},
      {"cross_entropy",
       OpKind::CrossEntropy,
       2,
       {tensor("logits"), tensor("targets"), flag("fused", true)}},
  };
  return builtins;
}

} // namespace

const BuiltinParam *Builtin::param(llvm::StringRef n) const {
  int i = paramIndex(n);
  return i < 0 ? nullptr : &params[i];
}

int Builtin::paramIndex(llvm::StringRef n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (n == params[i].name)
      return static_cast<int>(i);
  return -1;
}

const Builtin *mist::lookupBuiltin(llvm::StringRef name) {
  for (const Builtin &b : table())
    if (name == b.name)
      return &b;
  return nullptr;
}

llvm::ArrayRef<Builtin> mist::allBuiltins() { return table(); }

bool mist::wordAllowed(const BuiltinParam &p, llvm::StringRef w) {
  llvm::SmallVector<llvm::StringRef, 4> words;
  llvm::StringRef(p.words).split(words, ',');
  return llvm::is_contained(words, w);
}
