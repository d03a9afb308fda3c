//===- TrainerSizes.h - Sizes in train.cu, written in the model's symbols -===//
/// \file
/// Every size in a generated trainer is printed from its symbolic shape
/// (`b*s*hidden`, `3*hidden/tp`) over `constexpr` values a stage declares
/// once (`constexpr int64_t b = 4, s = 64, hidden = 64, tp = 1;`), so a reader
/// sees what a number means and which knob it follows.
///
/// Two things keep the text exact and compilable:
///  - C++ evaluates `3*b*s*hidden/tp` left to right in integers, which equals
///    the symbolic value when every term is whole at the stage's values; a
///    size where a term is not (or that is no polynomial) prints as its value;
///  - a symbol whose name the trainer already uses (`C`, `add`, `int`, ...)
///    is declared under another identifier (`add_`), never shadowing it.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/SymExpr.h"
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mist {

/// True when `name` is a C++ keyword or an identifier a generated trainer
/// uses unqualified (its runtime calls and types, its frames and locals).
bool isTrainerReservedName(const std::string &name);

class TrainerSizes {
public:
  /// Sizes of a stage with micro-batch `microBatch` and tensor-parallel
  /// degree `tp`; every other symbol of `table` has its bound value.
  TrainerSizes(const SymbolTable &table, int64_t microBatch, int tp);

  /// `e` as a C++ integer expression over the symbols' identifiers (or its
  /// value, see above). Records the symbols it uses for declarations().
  std::string text(const Expr &e);
  /// text(e), in parentheses unless it is a product of factors: safe as one
  /// factor of a larger expression (`C.rank() * (vocab/tp)`).
  std::string factor(const Expr &e);
  /// The integer value of `e` at the stage's values.
  int64_t value(const Expr &e) const;

  /// `constexpr int64_t b = 4, s = 64;` for the symbols text() used so far,
  /// in declaration order; empty when it used none.
  std::string declarations() const;

private:
  const SymbolTable &table;
  GiNaC::exmap values;             ///< every symbol with a value
  std::vector<std::string> idents; ///< per symbol: its identifier in train.cu
  std::vector<int64_t> valueOf;    ///< per symbol (0 when unbound)
  std::set<int> used;              ///< symbols text() printed
};

} // namespace mist
