//===- SymExpr.cpp - Symbolic dimensions and their canonical printing -----===//
#include "ir/SymExpr.h"

#include <algorithm>
#include <map>
#include <sstream>

using namespace mist;

const Symbol *SymbolTable::declare(const std::string &name, SymbolKind kind,
                                   std::optional<int64_t> value) {
  if (lookup(name))
    return nullptr;
  syms.push_back(Symbol{name, kind, GiNaC::possymbol(name), value});
  return &syms.back();
}

const Symbol *SymbolTable::lookup(const std::string &name) const {
  for (const Symbol &s : syms)
    if (s.name == name)
      return &s;
  return nullptr;
}

int SymbolTable::indexOf(const GiNaC::symbol &s) const {
  for (size_t i = 0; i < syms.size(); ++i)
    if (syms[i].sym.is_equal(s))
      return static_cast<int>(i);
  return -1;
}

const Symbol *SymbolTable::ofKind(SymbolKind kind) const {
  for (const Symbol &s : syms)
    if (s.kind == kind)
      return &s;
  return nullptr;
}

Expr SymbolTable::bindAll(const Expr &e, const GiNaC::exmap &extra) const {
  GiNaC::exmap m = extra;
  for (const Symbol &s : syms)
    if (s.value && !m.count(s.sym))
      m[s.sym] = GiNaC::numeric(static_cast<long>(*s.value));
  return e.subs(m).expand();
}

int Monomial::degree() const {
  int d = 0;
  for (auto &[i, p] : powers)
    d += p;
  return d;
}

namespace {

using Term = Monomial;

bool splitFactor(const Expr &f, const SymbolTable &table, Term &t) {
  if (GiNaC::is_a<GiNaC::numeric>(f)) {
    t.coeff *= GiNaC::ex_to<GiNaC::numeric>(f);
    return true;
  }
  if (GiNaC::is_a<GiNaC::symbol>(f)) {
    int idx = table.indexOf(GiNaC::ex_to<GiNaC::symbol>(f));
    if (idx < 0)
      return false;
    t.powers[idx] += 1;
    return true;
  }
  if (GiNaC::is_a<GiNaC::power>(f) && GiNaC::is_a<GiNaC::symbol>(f.op(0)) &&
      GiNaC::is_a<GiNaC::numeric>(f.op(1)) && GiNaC::ex_to<GiNaC::numeric>(f.op(1)).is_integer()) {
    int idx = table.indexOf(GiNaC::ex_to<GiNaC::symbol>(f.op(0)));
    if (idx < 0)
      return false;
    t.powers[idx] += GiNaC::ex_to<GiNaC::numeric>(f.op(1)).to_int();
    return true;
  }
  return false;
}

bool splitTerm(const Expr &e, const SymbolTable &table, Term &t) {
  if (GiNaC::is_a<GiNaC::mul>(e)) {
    for (size_t i = 0; i < e.nops(); ++i)
      if (!splitFactor(e.op(i), table, t))
        return false;
    return true;
  }
  return splitFactor(e, table, t);
}

std::string numStr(const GiNaC::numeric &n) {
  std::ostringstream os;
  os << n;
  return os.str();
}

std::string printTerm(const Term &t, const SymbolTable &table) {
  GiNaC::numeric c = GiNaC::abs(t.coeff);
  GiNaC::numeric num = c.numer(), den = c.denom();
  std::vector<std::string> top, bottom;
  auto power = [&](int idx, int p) {
    std::string s = table.symbols()[idx].name;
    return p == 1 ? s : s + "^" + std::to_string(p);
  };
  if (!num.is_equal(1))
    top.push_back(numStr(num));
  if (!den.is_equal(1))
    bottom.push_back(numStr(den));
  for (auto &[idx, p] : t.powers) {
    if (p > 0)
      top.push_back(power(idx, p));
    else if (p < 0)
      bottom.push_back(power(idx, -p));
  }
  std::string out;
  if (top.empty())
    out = "1";
  for (size_t i = 0; i < top.size(); ++i)
    out += (i ? "*" : "") + top[i];
  if (bottom.size() == 1)
    out += "/" + bottom[0];
  else if (bottom.size() > 1) {
    out += "/(";
    for (size_t i = 0; i < bottom.size(); ++i)
      out += (i ? "*" : "") + bottom[i];
    out += ")";
  }
  return out;
}

} // namespace

std::optional<std::vector<Monomial>> mist::monomials(const Expr &e, const SymbolTable &table) {
  Expr x = e.expand();
  std::vector<Term> terms;
  auto addTerm = [&](const Expr &te) {
    Term t;
    if (!splitTerm(te, table, t))
      return false;
    for (auto it = t.powers.begin(); it != t.powers.end();)
      it = it->second == 0 ? t.powers.erase(it) : std::next(it);
    terms.push_back(std::move(t));
    return true;
  };
  if (GiNaC::is_a<GiNaC::add>(x)) {
    for (size_t i = 0; i < x.nops(); ++i)
      if (!addTerm(x.op(i)))
        return std::nullopt;
  } else if (!addTerm(x)) {
    return std::nullopt;
  }
  // Degree descending, then graded by symbol declaration order.
  std::stable_sort(terms.begin(), terms.end(), [](const Term &a, const Term &b) {
    if (a.degree() != b.degree())
      return a.degree() > b.degree();
    auto ia = a.powers.begin(), ib = b.powers.begin();
    for (; ia != a.powers.end() && ib != b.powers.end(); ++ia, ++ib) {
      if (ia->first != ib->first)
        return ia->first < ib->first;
      if (ia->second != ib->second)
        return ia->second > ib->second;
    }
    return ia != a.powers.end() && ib == b.powers.end();
  });
  // A zero expression has no terms; GiNaC keeps `0` as one numeric term.
  if (terms.size() == 1 && terms[0].coeff.is_zero())
    terms.clear();
  return terms;
}

std::string mist::printExpr(const Expr &e, const SymbolTable &table) {
  std::optional<std::vector<Term>> terms = monomials(e, table);
  if (!terms) {
    // Not a Laurent polynomial over known symbols: GiNaC's own form.
    std::ostringstream os;
    os << e.expand();
    return os.str();
  }
  if (terms->empty())
    return "0";
  std::string out;
  for (size_t i = 0; i < terms->size(); ++i) {
    bool neg = (*terms)[i].coeff.is_negative();
    if (i == 0)
      out += neg ? "-" : "";
    else
      out += neg ? " - " : " + ";
    out += printTerm((*terms)[i], table);
  }
  return out;
}

bool mist::isIntegerPolynomial(const Expr &e, const SymbolTable &table) {
  Expr x = e.normal().expand();
  auto termOk = [&](const Expr &te) {
    Term t;
    if (!splitTerm(te, table, t) || !t.coeff.is_integer())
      return false;
    for (auto &[idx, p] : t.powers)
      if (p < 0)
        return false;
    return true;
  };
  if (!GiNaC::is_a<GiNaC::add>(x))
    return termOk(x);
  for (size_t i = 0; i < x.nops(); ++i)
    if (!termOk(x.op(i)))
      return false;
  return true;
}

bool mist::exprEqual(const Expr &a, const Expr &b) { return (a - b).expand().is_zero(); }

std::optional<int64_t> mist::exprToInt(const Expr &e) {
  Expr x = e.expand();
  if (!GiNaC::is_a<GiNaC::numeric>(x))
    return std::nullopt;
  const GiNaC::numeric &n = GiNaC::ex_to<GiNaC::numeric>(x);
  if (!n.is_integer() || GiNaC::abs(n) > GiNaC::numeric("4611686018427387904"))
    return std::nullopt;
  return std::stoll(numStr(n));
}

std::optional<double> mist::exprToDouble(const Expr &e) {
  Expr x = GiNaC::evalf(e.expand());
  if (!GiNaC::is_a<GiNaC::numeric>(x) || !GiNaC::ex_to<GiNaC::numeric>(x).is_real())
    return std::nullopt;
  return GiNaC::ex_to<GiNaC::numeric>(x).to_double();
}

std::string mist::groupDigits(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}
