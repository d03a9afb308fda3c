//===- Poly.h - Symbolic costs compiled for fast evaluation ---------------===//
/// \file
/// Once the model's sizes are bound, every cost of the IR is a Laurent
/// polynomial in the two tuner symbols, the micro-batch b and the
/// tensor-parallel degree tp: sum of c * b^i * tp^j. Poly holds such a
/// polynomial as a flat list of terms so the search evaluates it with a few
/// multiply-adds instead of GiNaC's subs().
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/SymExpr.h"
#include <optional>
#include <vector>

namespace mist {

class Poly {
public:
  struct Term {
    double coeff;
    int bPower, tpPower;
  };

  Poly() = default;
  /// Binds every symbol with a value and compiles; nullopt when a symbol
  /// other than b and tp stays free or the expression is not a polynomial.
  static std::optional<Poly> compile(const Expr &e, const SymbolTable &table);

  double eval(double b, double tp) const {
    double sum = 0;
    for (const Term &t : terms)
      sum += t.coeff * ipow(b, t.bPower) * ipow(tp, t.tpPower);
    return sum;
  }
  const std::vector<Term> &getTerms() const { return terms; }
  /// True when every coefficient of (this - other) is >= 0: then this >=
  /// other for all b, tp > 0.
  bool dominates(const Poly &other) const;
  Poly operator+(const Poly &o) const;
  Poly operator-(const Poly &o) const;
  /// This divided by tp (a tp-th of a size split over the tp group).
  Poly overTp() const;

private:
  static double ipow(double x, int p) {
    double r = 1;
    for (int i = 0; i < (p < 0 ? -p : p); ++i)
      r *= x;
    return p < 0 ? 1 / r : r;
  }
  void normalize();
  std::vector<Term> terms;
};

} // namespace mist
