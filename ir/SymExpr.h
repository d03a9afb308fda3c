//===- SymExpr.h - Symbolic dimensions and their canonical printing -------===//
/// \file
/// Symbolic sizes are GiNaC expressions over symbols owned by a SymbolTable
/// (one per module, never global). GiNaC prints terms in hash order, so all
/// textual output goes through printExpr(), which orders terms by degree and
/// then by symbol declaration order: the same expression always prints the
/// same way.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <ginac/ginac.h>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mist {

using Expr = GiNaC::ex;

/// What a symbol stands for; decides who binds its value.
enum class SymbolKind {
  Batch, ///< micro-batch size `b`, chosen by the tuner
  Seq,   ///< sequence length `s`, bound from the train section
  Model, ///< a model hyper-parameter (hidden, heads, ...), bound at instantiation
  TP,    ///< tensor-parallel degree `tp`, chosen by the tuner
};

struct Symbol {
  std::string name;
  SymbolKind kind;
  GiNaC::possymbol sym;
  std::optional<int64_t> value; ///< bound value, if any
};

class SymbolTable {
public:
  /// Declares a symbol; returns nullptr when the name is taken.
  const Symbol *declare(const std::string &name, SymbolKind kind, std::optional<int64_t> value);
  const Symbol *lookup(const std::string &name) const;
  const std::vector<Symbol> &symbols() const { return syms; }
  /// Declaration index of a GiNaC symbol, or -1 when it is foreign.
  int indexOf(const GiNaC::symbol &s) const;
  /// The symbol of a kind (first declared), e.g. the batch or tp symbol.
  const Symbol *ofKind(SymbolKind kind) const;

  /// Substitutes every bound value, plus the extra bindings given.
  Expr bindAll(const Expr &e, const GiNaC::exmap &extra = {}) const;

private:
  std::vector<Symbol> syms;
};

/// A monomial: rational coefficient times powers of the table's symbols
/// (by declaration index; negative powers divide).
struct Monomial {
  GiNaC::numeric coeff = 1;
  std::map<int, int> powers;
  int degree() const;
};

/// The expanded terms of `e` in printExpr's order, or nullopt when `e` is not
/// a Laurent polynomial over the table's symbols. Zero has no terms.
std::optional<std::vector<Monomial>> monomials(const Expr &e, const SymbolTable &table);

/// Canonical, deterministic text of `e` (expanded; terms by descending degree,
/// then by symbol declaration order). Non-polynomial parts fall back to GiNaC.
std::string printExpr(const Expr &e, const SymbolTable &table);

/// True when `e` is a polynomial with integer coefficients and non-negative
/// powers of the table's symbols: whole for every positive integer binding.
bool isIntegerPolynomial(const Expr &e, const SymbolTable &table);

/// True when `a - b` expands to zero.
bool exprEqual(const Expr &a, const Expr &b);

/// The integer value of `e` when it is one.
std::optional<int64_t> exprToInt(const Expr &e);
/// The value of a numeric expression as a double.
std::optional<double> exprToDouble(const Expr &e);

/// Integer with thousands separators (1,315,575,808).
std::string groupDigits(int64_t v);

} // namespace mist
