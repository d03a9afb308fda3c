//===- Types.h - Tensor types of the IR -----------------------------------===//
/// \file
/// A tensor type is a dtype, a symbolic shape, a role (what the tensor is for,
/// which decides where it lives and how memory is accounted), and its
/// tensor-parallel state: replicated, sharded along one axis over the tp
/// group, or a partial sum that must feed an all_reduce.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/SymExpr.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>

namespace mist {

enum class DType { BF16, F16, F32, I32, U8 };
/// Every DType, for tables of them (keep beside the enum).
constexpr DType allDTypes[] = {DType::BF16, DType::F16, DType::F32, DType::I32, DType::U8};
enum class Role { Act, Param, Grad, Opt };

llvm::StringRef dtypeName(DType t);
std::optional<DType> parseDType(llvm::StringRef s);
unsigned dtypeBytes(DType t);
llvm::StringRef roleName(Role r);
std::optional<Role> parseRole(llvm::StringRef s);

struct TensorType {
  DType dtype = DType::BF16;
  std::vector<Expr> shape;
  Role role = Role::Act;
  int shardAxis = -1;   ///< axis split over the tp group, or -1
  bool partial = false; ///< partial sum over the tp group

  bool isSharded() const { return shardAxis >= 0; }
  /// Sequence parallelism's split (passes/SequenceParallel.cpp): an
  /// activation whose tokens, flattened to axis 0 ([b*s/tp, channels]), are
  /// split over tp, a contiguous tp-th per rank.
  bool isTokenSplit() const { return role == Role::Act && shardAxis == 0; }
  unsigned rank() const { return static_cast<unsigned>(shape.size()); }
  Expr numElements() const;
  Expr bytes() const { return numElements() * dtypeBytes(dtype); }
  /// Structural equality with symbolic comparison of the shape.
  bool equals(const TensorType &o) const;
  std::string str(const SymbolTable &table) const;
};

} // namespace mist
