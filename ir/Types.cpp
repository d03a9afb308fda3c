//===- Types.cpp - Tensor types of the IR ---------------------------------===//
#include "ir/Types.h"

using namespace mist;

llvm::StringRef mist::dtypeName(DType t) {
  switch (t) {
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::U8:
    return "u8";
  }
  return "?";
}

std::optional<DType> mist::parseDType(llvm::StringRef s) {
  for (DType t : {DType::BF16, DType::F16, DType::F32, DType::I32, DType::U8})
    if (dtypeName(t) == s)
      return t;
  return std::nullopt;
}

unsigned mist::dtypeBytes(DType t) {
  switch (t) {
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::U8:
    return 1;
  }
  return 0;
}

llvm::StringRef mist::roleName(Role r) {
  switch (r) {
  case Role::Act:
    return "act";
  case Role::Param:
    return "param";
  case Role::Grad:
    return "grad";
  case Role::Opt:
    return "opt";
  }
  return "?";
}

std::optional<Role> mist::parseRole(llvm::StringRef s) {
  for (Role r : {Role::Act, Role::Param, Role::Grad, Role::Opt})
    if (roleName(r) == s)
      return r;
  return std::nullopt;
}

Expr TensorType::numElements() const {
  Expr n = 1;
  for (const Expr &d : shape)
    n *= d;
  return n;
}

bool TensorType::equals(const TensorType &o) const {
  if (dtype != o.dtype || role != o.role || shardAxis != o.shardAxis || partial != o.partial ||
      shape.size() != o.shape.size())
    return false;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!exprEqual(shape[i], o.shape[i]))
      return false;
  return true;
}

std::string TensorType::str(const SymbolTable &table) const {
  std::string s = std::string(roleName(role)) + " " + std::string(dtypeName(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + printExpr(shape[i], table);
  s += "]";
  if (shardAxis >= 0)
    s += " shard(" + std::to_string(shardAxis) + ")";
  if (partial)
    s += " partial";
  return s;
}
