//===- IR.cpp - Module, regions, ops and values ---------------------------===//
#include "ir/IR.h"

using namespace mist;

llvm::StringRef mist::opName(OpKind k) {
  switch (k) {
#define MIST_FWD_OP(Kind, Name)                                                                    \
  case OpKind::Kind:                                                                               \
    return Name;
#define MIST_OP(Kind, Name)                                                                        \
  case OpKind::Kind:                                                                               \
    return Name;
#include "ir/Ops.def"
#define MIST_FWD_OP(Kind, Name)                                                                    \
  case OpKind::Kind##Grad:                                                                         \
    return Name "_grad";
#include "ir/Ops.def"
  }
  return "?";
}

std::optional<OpKind> mist::parseOpName(llvm::StringRef s) {
#define MIST_FWD_OP(Kind, Name)                                                                    \
  if (s == Name)                                                                                   \
    return OpKind::Kind;                                                                           \
  if (s == Name "_grad")                                                                           \
    return OpKind::Kind##Grad;
#define MIST_OP(Kind, Name)                                                                        \
  if (s == Name)                                                                                   \
    return OpKind::Kind;
#include "ir/Ops.def"
  return std::nullopt;
}

std::optional<OpKind> mist::gradKindOf(OpKind k) {
  switch (k) {
#define MIST_FWD_OP(Kind, Name)                                                                    \
  case OpKind::Kind:                                                                               \
    return OpKind::Kind##Grad;
#include "ir/Ops.def"
  default:
    return std::nullopt;
  }
}

bool mist::isGradOp(OpKind k) {
  switch (k) {
#define MIST_FWD_OP(Kind, Name)                                                                    \
  case OpKind::Kind##Grad:                                                                         \
    return true;
#include "ir/Ops.def"
  case OpKind::GradAdd:
    return true;
  default:
    return false;
  }
}

const Attr *Op::attr(const std::string &name) const {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

std::optional<Expr> Op::dimAttr(const std::string &name) const {
  if (const Attr *a = attr(name))
    if (auto *e = std::get_if<Expr>(a))
      return *e;
  return std::nullopt;
}

bool Op::boolAttr(const std::string &name, bool dflt) const {
  if (const Attr *a = attr(name))
    if (auto *b = std::get_if<bool>(a))
      return *b;
  return dflt;
}

std::optional<double> Op::realAttr(const std::string &name) const {
  if (const Attr *a = attr(name)) {
    if (auto *d = std::get_if<double>(a))
      return *d;
  }
  return std::nullopt;
}

std::string Op::enumAttr(const std::string &name, llvm::StringRef dflt) const {
  if (const Attr *a = attr(name))
    if (auto *w = std::get_if<EnumWord>(a))
      return w->word;
  return dflt.str();
}

std::optional<Expr> RegionSummary::get(llvm::StringRef key) const {
  for (auto &[k, v] : entries)
    if (k == key)
      return v;
  return std::nullopt;
}

std::string Module::uniqueName(const std::string &base) {
  std::string name = base;
  if (usedNames.count(name)) {
    unsigned &n = nextSuffix.try_emplace(base, 1).first->second;
    do
      name = base + "." + std::to_string(n++);
    while (usedNames.count(name));
  }
  usedNames.insert(name);
  return name;
}

bool Module::reserveName(const std::string &name) { return usedNames.insert(name).second; }

void Module::assume(const Expr &dividend, const Expr &divisor) {
  // Facts true for every value of the symbols (heads % heads, 4*h % 2) say
  // nothing; keep those whose quotient is not an integer polynomial.
  if (isIntegerPolynomial(dividend / divisor, symbols))
    return;
  for (const Assumption &a : assumptions)
    if (exprEqual(a.dividend, dividend) && exprEqual(a.divisor, divisor))
      return;
  assumptions.push_back({dividend, divisor});
}

void Module::dropBackward() {
  for (Region *r : regions) {
    if (!r->bwd)
      continue;
    for (auto &a : r->bwd->args)
      usedNames.erase(a->name);
    for (auto &op : r->bwd->ops)
      for (auto &res : op->results)
        usedNames.erase(res->name);
    r->bwd.reset();
  }
  // The suffix hints assume every smaller suffix is taken: no longer so.
  nextSuffix.clear();
  state.differentiated = false;
  dropCosts();
}

void Module::dropCosts() {
  for (Region *r : regions) {
    for (Block *b : {&r->fwd, r->bwd ? &*r->bwd : nullptr})
      if (b)
        for (auto &op : b->ops)
          op->cost.reset();
    r->summary.reset();
  }
  state.costed = false;
}

std::string TrainConfig::noDecayText() const {
  std::string out;
  for (auto [decayed, name] : {std::pair{decayBiases, "bias"}, std::pair{decayNorms, "norm"},
                               std::pair{decayEmbeddings, "embedding"}})
    if (!decayed)
      out += (out.empty() ? "" : ",") + std::string(name);
  return out;
}
