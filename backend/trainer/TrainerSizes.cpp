//===- TrainerSizes.cpp - Sizes in train.cu, written in the model's symbols ===//
#include "backend/trainer/TrainerSizes.h"

#include <cctype>
#include <fmt/format.h>
#include <fmt/ranges.h>

using namespace mist;

bool mist::isTrainerReservedName(const std::string &name) {
  static const std::set<std::string> names = {
      // C++20 keywords and alternative tokens.
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "final", "override", "main",
      // Namespaces and types the trainer names.
      "mist", "rt", "ops", "std", "buf", "int64_t", "int32_t", "AdamStep", "AttentionShape",
      "BufferKind", "Frame", "Index", "RegionKind", "StageRunner", "StageSpec", "TpContext",
      "TrainerSpec",
      // Parameters and locals of the emitted functions.
      "G", "L", "C", "r", "a", "mb", "step", "spec", "argc", "argv",
      // Runtime calls (runtime/ops/Ops.h, runtime/trainer/Trainer.h).
      "embedding", "embeddingGrad", "positionEmbedding", "positionEmbeddingGrad", "add", "copy",
      "layerNorm", "layerNormGrad", "rmsNorm", "rmsNormGrad", "linear", "linearGrad", "linearGelu",
      "linearGradGelu", "addLayerNorm", "addRmsNorm", "lmHead", "lmHeadGrad", "attention",
      "attentionGrad", "rope", "ropeGrad", "gelu", "geluGrad", "geluExact", "geluExactGrad",
      "sliceLast", "sliceLastGrad", "concatLast", "concatLastGrad", "silu", "siluGrad", "mul",
      "mulGrad", "crossEntropyRowMax", "crossEntropyRowSums", "crossEntropyFinish",
      "crossEntropyGrad", "maxOverBlocks", "adamW", "adamWMany", "drawInitialValues", "runTrainer",
      "setThreadsPerRank", "describe"};
  if (names.count(name))
    return true;
  // The emitter's own functions: sN_... and stageN.
  auto numbered = [&](const std::string &prefix, bool suffix) {
    size_t i = prefix.size(), digits = 0;
    if (name.compare(0, i, prefix) != 0)
      return false;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])))
      ++i, ++digits;
    return digits > 0 && (i == name.size() || (suffix && name[i] == '_'));
  };
  return numbered("s", true) || numbered("stage", false);
}

namespace {

/// `name` as a C++ identifier: other characters become '_', a name C++
/// reserves (leading '_', "__") is changed, one the trainer uses gets a
/// trailing '_' (`add_`), or a `size_` prefix where that is still one
/// (`s0_x` -> `size_s0_x`); a name taken already gets more '_'.
std::string identifierFor(const std::string &name, const std::set<std::string> &taken) {
  std::string id;
  for (char c : name)
    id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (id.empty() || !std::isalpha(static_cast<unsigned char>(id[0])))
    id = "n" + id;
  while (id.find("__") != std::string::npos)
    id.erase(id.find("__"), 1);
  if (isTrainerReservedName(id))
    id = isTrainerReservedName(id + "_") ? "size_" + id : id + "_";
  while (taken.count(id))
    id += '_';
  return id;
}

/// The integer value of a term at the stage's values, when whole.
std::optional<int64_t> termValue(const Monomial &t, const std::vector<int64_t> &valueOf) {
  Expr v = t.coeff;
  for (auto [idx, p] : t.powers)
    v *= GiNaC::pow(GiNaC::numeric(static_cast<long>(valueOf[idx])), p);
  return exprToInt(v);
}

} // namespace

TrainerSizes::TrainerSizes(const SymbolTable &table, int64_t microBatch, int tp) : table(table) {
  std::set<std::string> taken;
  for (const Symbol &s : table.symbols()) {
    int64_t v = s.value.value_or(0);
    if (s.kind == SymbolKind::Batch)
      v = microBatch;
    else if (s.kind == SymbolKind::TP)
      v = tp;
    if (v > 0 || s.value)
      values[s.sym] = GiNaC::numeric(static_cast<long>(v));
    valueOf.push_back(v);
    idents.push_back(identifierFor(s.name, taken));
    taken.insert(idents.back());
  }
}

int64_t TrainerSizes::value(const Expr &e) const {
  return exprToInt(e.subs(values).expand()).value_or(0);
}

std::string TrainerSizes::text(const Expr &e) {
  const int64_t whole = value(e);
  auto literal = [&] { return std::to_string(whole); };
  std::optional<std::vector<Monomial>> terms = monomials(e.normal(), table);
  if (!terms || terms->empty())
    return literal();
  std::string out;
  std::set<int> symbols;
  for (size_t i = 0; i < terms->size(); ++i) {
    const Monomial &t = (*terms)[i];
    if (!termValue(t, valueOf))
      return literal();
    // Numerator first, then one division: exact under C++'s left-to-right
    // integer arithmetic because the term is whole.
    GiNaC::numeric c = GiNaC::abs(t.coeff);
    std::vector<std::string> top, bottom;
    if (!c.numer().is_equal(1))
      top.push_back(std::to_string(c.numer().to_long()));
    if (!c.denom().is_equal(1))
      bottom.push_back(std::to_string(c.denom().to_long()));
    for (auto [idx, p] : t.powers) {
      if (!valueOf[idx])
        return literal();
      symbols.insert(idx);
      for (int k = 0; k < std::abs(p); ++k)
        (p > 0 ? top : bottom).push_back(idents[idx]);
    }
    std::string term = top.empty() ? "1" : fmt::format("{}", fmt::join(top, "*"));
    if (bottom.size() == 1)
      term += "/" + bottom[0];
    else if (bottom.size() > 1)
      term += fmt::format("/({})", fmt::join(bottom, "*"));
    const bool negative = t.coeff.is_negative();
    out += i == 0 ? (negative ? "-" : "") : (negative ? " - " : " + ");
    out += term;
  }
  used.insert(symbols.begin(), symbols.end());
  return out;
}

std::string TrainerSizes::factor(const Expr &e) {
  std::string t = text(e);
  return t.find_first_of("+-/") == std::string::npos ? t : "(" + t + ")";
}

std::string TrainerSizes::declarations() const {
  std::vector<std::string> parts;
  for (int idx : used)
    parts.push_back(fmt::format("{} = {}", idents[idx], valueOf[idx]));
  return parts.empty() ? "" : fmt::format("constexpr int64_t {};", fmt::join(parts, ", "));
}
