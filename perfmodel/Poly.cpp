//===- Poly.cpp - Symbolic costs compiled for fast evaluation -------------===//
#include "perfmodel/Poly.h"

#include <algorithm>
#include <map>

using namespace mist;

std::optional<Poly> Poly::compile(const Expr &e, const SymbolTable &table) {
  const Symbol *b = table.ofKind(SymbolKind::Batch), *tp = table.ofKind(SymbolKind::TP);
  Expr x = table.bindAll(e).expand();
  Poly p;
  auto addTerm = [&](const Expr &term) -> bool {
    Term t{1.0, 0, 0};
    auto factor = [&](const Expr &f) -> bool {
      if (GiNaC::is_a<GiNaC::numeric>(f)) {
        if (!GiNaC::ex_to<GiNaC::numeric>(f).is_real())
          return false;
        t.coeff *= GiNaC::ex_to<GiNaC::numeric>(f).to_double();
        return true;
      }
      Expr base = f;
      int power = 1;
      if (GiNaC::is_a<GiNaC::power>(f)) {
        base = f.op(0);
        if (!GiNaC::is_a<GiNaC::numeric>(f.op(1)) ||
            !GiNaC::ex_to<GiNaC::numeric>(f.op(1)).is_integer())
          return false;
        power = GiNaC::ex_to<GiNaC::numeric>(f.op(1)).to_int();
      }
      if (b && base.is_equal(b->sym))
        t.bPower += power;
      else if (tp && base.is_equal(tp->sym))
        t.tpPower += power;
      else
        return false;
      return true;
    };
    if (GiNaC::is_a<GiNaC::mul>(term)) {
      for (size_t i = 0; i < term.nops(); ++i)
        if (!factor(term.op(i)))
          return false;
    } else if (!factor(term)) {
      return false;
    }
    p.terms.push_back(t);
    return true;
  };
  if (GiNaC::is_a<GiNaC::add>(x)) {
    for (size_t i = 0; i < x.nops(); ++i)
      if (!addTerm(x.op(i)))
        return std::nullopt;
  } else if (!x.is_zero() && !addTerm(x)) {
    return std::nullopt;
  }
  p.normalize();
  return p;
}

void Poly::normalize() {
  std::map<std::pair<int, int>, double> merged;
  for (const Term &t : terms)
    merged[{t.bPower, t.tpPower}] += t.coeff;
  terms.clear();
  for (auto &[k, c] : merged)
    if (c != 0)
      terms.push_back({c, k.first, k.second});
}

Poly Poly::operator+(const Poly &o) const {
  Poly r = *this;
  r.terms.insert(r.terms.end(), o.terms.begin(), o.terms.end());
  r.normalize();
  return r;
}

Poly Poly::operator-(const Poly &o) const {
  Poly r = *this;
  for (Term t : o.terms) {
    t.coeff = -t.coeff;
    r.terms.push_back(t);
  }
  r.normalize();
  return r;
}

Poly Poly::overTp() const {
  Poly r = *this;
  for (Term &t : r.terms)
    --t.tpPower;
  return r;
}

bool Poly::dominates(const Poly &other) const {
  Poly diff = *this - other;
  return std::all_of(diff.terms.begin(), diff.terms.end(),
                     [](const Term &t) { return t.coeff >= 0; });
}
