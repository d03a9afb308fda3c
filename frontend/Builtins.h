//===- Builtins.h - Signatures of the language's built-in ops -------------===//
/// \file
/// The table Sema checks calls against and IRGen builds ops from: one entry
/// per built-in, naming its IR op kind and its parameters (kind, whether
/// required, default). Parameters can be passed by position (the first
/// `maxPositional`) or by name.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace mist {

/// Offset: a size that may also be 0 (where a range starts).
enum class ArgKind { Tensor, Dim, Offset, Real, Bool, Word };
llvm::StringRef argKindName(ArgKind k);

struct BuiltinParam {
  const char *name;
  ArgKind kind;
  bool required;
  /// Default for optional Real/Bool/Word parameters (Dim and Tensor
  /// parameters without a value are simply absent).
  double realDefault = 0;
  bool boolDefault = false;
  const char *wordDefault = "";
  /// Allowed words of a Word parameter, comma-separated.
  const char *words = "";
};

struct Builtin {
  const char *name;
  OpKind kind;
  unsigned maxPositional;
  std::vector<BuiltinParam> params;

  const BuiltinParam *param(llvm::StringRef name) const;
  int paramIndex(llvm::StringRef name) const;
};

const Builtin *lookupBuiltin(llvm::StringRef name);
llvm::ArrayRef<Builtin> allBuiltins();
bool wordAllowed(const BuiltinParam &p, llvm::StringRef word);

} // namespace mist
