//===- Printer.cpp - Deterministic textual IR -----------------------------===//
#include "ir/Printer.h"

#include <fmt/format.h>

using namespace mist;

std::string mist::formatReal(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) // keep reals distinct from sizes
    s += ".0";
  return s;
}

namespace {

llvm::StringRef symbolKindName(SymbolKind k) {
  switch (k) {
  case SymbolKind::Batch:
    return "batch";
  case SymbolKind::Seq:
    return "seq";
  case SymbolKind::Model:
    return "model";
  case SymbolKind::TP:
    return "tp";
  }
  return "?";
}

class ModulePrinter {
public:
  ModulePrinter(const Module &m, llvm::raw_ostream &os) : m(m), os(os) {}

  void print() {
    os << "module @" << m.name << " {\n";
    for (const Symbol &s : m.symbols.symbols()) {
      os << "  sym " << s.name;
      if (s.value)
        os << " = " << *s.value;
      os << " : " << symbolKindName(s.kind) << "\n";
    }
    for (const Assumption &a : m.assumptions)
      os << "  assume " << expr(a.dividend) << " % " << expr(a.divisor) << " == 0\n";
    printTrain();
    printState();
    for (auto &in : m.inputs)
      os << "  input %" << in->name << " : " << type(*in) << "\n";
    for (const Region *r : m.regions)
      printRegion(*r);
    os << "}\n";
  }

private:
  std::string expr(const Expr &e) { return printExpr(e, m.symbols); }
  std::string type(const Value &v) { return v.typed ? v.type.str(m.symbols) : "?"; }

  void printTrain() {
    const TrainConfig &t = m.train;
    os << "  train {global_batch = " << t.globalBatch << ", optimizer = \"" << t.optimizer
       << "\", lr = " << formatReal(t.lr) << ", beta1 = " << formatReal(t.beta1)
       << ", beta2 = " << formatReal(t.beta2) << ", weight_decay = " << formatReal(t.weightDecay)
       << ", eps = " << formatReal(t.eps) << ", grad_clip = " << formatReal(t.gradClip)
       << ", warmup_steps = " << t.warmupSteps << ", dtype = \"" << dtypeName(t.dtype)
       << "\", master_dtype = \"" << dtypeName(t.masterDtype) << "\"";
    if (t.gradDtype) // unset: the master dtype (printed as given, for round trips)
      os << ", grad_dtype = \"" << dtypeName(*t.gradDtype) << "\"";
    // The schedule's settings only where they differ from the defaults.
    if (t.lrDecay != "cosine")
      os << ", lr_decay = \"" << t.lrDecay << "\"";
    if (t.minLr)
      os << ", min_lr = " << formatReal(*t.minLr);
    if (t.decayFraction)
      os << ", decay_fraction = " << formatReal(*t.decayFraction);
    if (t.noDecayText() != "bias,norm,embedding") // the default is not printed
      os << ", no_decay = \"" << t.noDecayText() << "\"";
    if (!t.cluster.empty())
      os << ", cluster = \"" << t.cluster << "\"";
    os << "}\n";
  }

  void printState() {
    std::vector<const char *> flags;
    if (m.state.shaped)
      flags.push_back("shaped");
    if (m.state.tpSharded)
      flags.push_back("tp_sharded");
    if (m.state.sequenceSplit)
      flags.push_back("sequence_split");
    if (m.state.differentiated)
      flags.push_back("differentiated");
    if (m.state.costed)
      flags.push_back("costed");
    os << "  state {";
    for (size_t i = 0; i < flags.size(); ++i)
      os << (i ? ", " : "") << flags[i];
    os << "}\n";
  }

  void printAttr(const Attr &a) {
    if (auto *e = std::get_if<Expr>(&a))
      os << expr(*e);
    else if (auto *b = std::get_if<bool>(&a))
      os << (*b ? "true" : "false");
    else if (auto *d = std::get_if<double>(&a))
      os << formatReal(*d);
    else
      os << '"' << std::get<EnumWord>(a).word << '"';
  }

  static bool isZeroCost(const OpCost &c) {
    for (const Expr *e : {&c.flops, &c.read, &c.write, &c.saved, &c.comm})
      if (!e->expand().is_zero())
        return false;
    return true;
  }

  void printCost(const OpCost &c) {
    const std::pair<const char *, const Expr *> fields[] = {{"flops", &c.flops},
                                                            {"read", &c.read},
                                                            {"write", &c.write},
                                                            {"saved", &c.saved},
                                                            {"comm", &c.comm}};
    os << "\n        cost(";
    bool first = true;
    for (auto &[name, e] : fields) {
      if (e->expand().is_zero())
        continue;
      os << (first ? "" : ", ") << name << " = " << expr(*e);
      first = false;
    }
    os << ")";
  }

  void printOp(const Op &op) {
    os << "    ";
    for (size_t i = 0; i < op.results.size(); ++i)
      os << (i ? ", " : "") << "%" << op.results[i]->name;
    os << " = " << opName(op.kind);
    for (size_t i = 0; i < op.operands.size(); ++i)
      os << (i ? ", " : " ") << "%" << op.operands[i]->name;
    if (!op.attrs.empty()) {
      os << " {";
      bool first = true;
      for (auto &[k, v] : op.attrs) {
        os << (first ? "" : ", ") << k << " = ";
        printAttr(v);
        first = false;
      }
      os << "}";
    }
    os << " : ";
    for (size_t i = 0; i < op.results.size(); ++i)
      os << (i ? ", " : "") << type(*op.results[i]);
    if (op.cost && !isZeroCost(*op.cost))
      printCost(*op.cost);
    os << "\n";
  }

  void printBlock(const Block &b) {
    os << "(";
    for (size_t i = 0; i < b.args.size(); ++i)
      os << (i ? ", " : "") << "%" << b.args[i]->name << ": " << type(*b.args[i]);
    os << ") {\n";
    for (auto &op : b.ops)
      printOp(*op);
    os << "    yield";
    for (size_t i = 0; i < b.yields.size(); ++i)
      os << (i ? ", " : " ") << "%" << b.yields[i]->name;
    os << "\n  }";
  }

  void printRegion(const Region &r) {
    os << "\n  " << regionName(r.kind);
    if (r.kind == RegionKind::Layer)
      os << " repeat " << expr(r.repeat);
    os << " ";
    printBlock(r.fwd);
    if (r.bwd) {
      os << " backward ";
      printBlock(*r.bwd);
    }
    if (r.summary) {
      os << " summary(";
      bool first = true;
      for (auto &[k, v] : r.summary->entries) {
        os << (first ? "" : ",\n          ") << k << " = " << expr(v);
        first = false;
      }
      os << ")";
    }
    os << "\n";
  }

  const Module &m;
  llvm::raw_ostream &os;
};

} // namespace

void mist::printModule(const Module &m, llvm::raw_ostream &os) { ModulePrinter(m, os).print(); }
