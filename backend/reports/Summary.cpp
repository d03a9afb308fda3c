//===- Summary.cpp - Human-readable model summary -------------------------===//
#include "backend/reports/Summary.h"

#include "ir/OpSemantics.h"
#include <fmt/format.h>

using namespace mist;

namespace {

GiNaC::exmap unitPlan(const Module &m) {
  GiNaC::exmap unit;
  for (SymbolKind k : {SymbolKind::TP, SymbolKind::Batch})
    if (const Symbol *s = m.symbols.ofKind(k))
      unit[s->sym] = 1;
  return unit;
}

std::optional<int64_t> regionParams(const Module &m, const Region &r) {
  Expr total = 0;
  for (auto &op : r.fwd.ops)
    if (op->kind == OpKind::Param && op->result()->typed)
      total += op->result()->type.numElements();
  return exprToInt(m.symbols.bindAll(total, unitPlan(m)));
}

std::string human(double v, const char *unit) {
  const char *prefixes[] = {"", " K", " M", " G", " T", " P", " E"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 6) {
    v /= 1000;
    ++i;
  }
  return fmt::format("{:.3f}{}{}", v, prefixes[i], unit);
}

} // namespace

std::optional<int64_t> mist::countParameters(const Module &m) {
  auto pre = regionParams(m, m.pre), layer = regionParams(m, m.layer),
       post = regionParams(m, m.post);
  auto repeat = exprToInt(m.symbols.bindAll(m.layer.repeat));
  if (!pre || !layer || !post || !repeat)
    return std::nullopt;
  // Exact in GiNaC: nullopt (not a wrapped negative) past 64 bits.
  return exprToInt(Expr(*pre) + Expr(*layer) * Expr(*repeat) + Expr(*post));
}

void mist::printSummary(const Module &m, llvm::raw_ostream &os) {
  os << "model " << m.name << "\n  sizes:";
  for (const Symbol &s : m.symbols.symbols())
    if (s.value)
      os << " " << s.name << " = " << *s.value;
  // By their names in this module: a model parameter may have taken `tp`.
  const Symbol *batch = m.symbols.ofKind(SymbolKind::Batch), *tp = m.symbols.ofKind(SymbolKind::TP);
  os << "\n  free symbols: " << (batch ? batch->name : "b") << " (micro-batch), "
     << (tp ? tp->name : "tp") << " (tensor-parallel degree)\n";
  auto repeat = exprToInt(m.symbols.bindAll(m.layer.repeat)).value_or(0);
  auto pre = regionParams(m, m.pre), layer = regionParams(m, m.layer),
       post = regionParams(m, m.post);
  auto total = countParameters(m);
  // Past 2^62 (a model no cluster holds) the count is not printed exactly.
  const std::string tooMany = "more than 4,611,686,018,427,387,904";
  const std::optional<int64_t> layersTotal =
      layer ? exprToInt(Expr(*layer) * Expr(repeat)) : std::nullopt;
  os << "  parameters: " << (total ? groupDigits(*total) : tooMany) << " ("
     << (total ? human(static_cast<double>(*total), "") : "?") << ")\n";
  os << "    pre    " << (pre ? groupDigits(*pre) : "?") << "\n";
  os << "    layer  " << (layer ? groupDigits(*layer) : "?") << " x " << repeat << " = "
     << (!layer        ? "?"
         : layersTotal ? groupDigits(*layersTotal)
                       : tooMany)
     << "\n";
  os << "    post   " << (post ? groupDigits(*post) : "?") << "\n";
  if (!m.layer.summary)
    return;
  const RegionSummary &s = *m.layer.summary;
  static const std::pair<const char *, const char *> rows[] = {{"fwd_flops", "forward FLOPs"},
                                                               {"bwd_flops", "backward FLOPs"},
                                                               {"saved", "saved activations"},
                                                               {"fwd_comm", "tp all-reduce (fwd)"},
                                                               {"bwd_comm", "tp all-reduce (bwd)"}};
  os << "  per layer and micro-batch:\n";
  for (auto &[key, label] : rows)
    if (auto e = s.get(key))
      os << fmt::format("    {:<20} {}\n", label, printExpr(*e, m.symbols));
  // The all-reduce rows give each rank's contribution, which does not depend
  // on tp; at tp = 1 nothing is sent.
  os << "  per layer at b = 1, tp = 1 (all-reduce: bytes per rank once tp > 1):\n";
  for (auto &[key, label] : rows)
    if (auto e = s.get(key)) {
      auto v = exprToDouble(m.symbols.bindAll(*e, unitPlan(m)));
      bool bytes = llvm::StringRef(key).contains("comm") || llvm::StringRef(key) == "saved";
      os << fmt::format("    {:<20} {}\n", label,
                        v ? (bytes ? human(*v, "B") : human(*v, "FLOP")) : "?");
    }
}
