//===- IR.h - Module, regions, ops and values -----------------------------===//
/// \file
/// The IR of one model: symbols and divisibility assumptions, module inputs,
/// and three regions: `pre` (embeddings), `layer` (one body repeated `repeat`
/// times; the tuner assumes identical layers) and `post` (head and loss).
/// Each region has a forward block and, after the backward pass, a backward
/// block. Ops are in SSA form; every value has a module-unique name taken
/// from the source so dumps and checkpoints have stable names.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Region.h"
#include "ir/Types.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace mist {

enum class OpKind {
#define MIST_FWD_OP(Kind, Name) Kind,
#define MIST_OP(Kind, Name) Kind,
#include "ir/Ops.def"
#define MIST_FWD_OP(Kind, Name) Kind##Grad,
#include "ir/Ops.def"
};

llvm::StringRef opName(OpKind k);
std::optional<OpKind> parseOpName(llvm::StringRef s);
/// The backward kind of a forward op with a gradient rule.
std::optional<OpKind> gradKindOf(OpKind k);
bool isGradOp(OpKind k);

class Op;

struct Value {
  std::string name;
  TensorType type;
  bool typed = false; ///< false until shape inference assigns `type`
  Op *def = nullptr;  ///< null for block arguments and module inputs
};

/// An attribute: a symbolic size, a flag, a real number or an enum word.
struct EnumWord {
  std::string word;
  bool operator==(const EnumWord &o) const { return word == o.word; }
};
using Attr = std::variant<Expr, bool, double, EnumWord>;
using AttrMap = std::map<std::string, Attr>; ///< sorted: deterministic printing

/// Symbolic costs of one op (bytes and FLOPs per micro-batch).
struct OpCost {
  Expr flops = 0; ///< matrix-multiply FLOPs (the Megatron convention)
  Expr read = 0;  ///< bytes read from device memory
  Expr write = 0; ///< bytes written
  Expr saved = 0; ///< bytes this forward op keeps alive for the backward
  Expr comm = 0;  ///< bytes each rank contributes to a collective
};

class Op {
public:
  Op(OpKind kind, llvm::SMLoc loc) : kind(kind), loc(loc) {}
  OpKind kind;
  llvm::SMLoc loc;
  std::vector<Value *> operands;
  std::vector<std::unique_ptr<Value>> results;
  AttrMap attrs;
  std::optional<OpCost> cost;

  Value *result(unsigned i = 0) const { return results[i].get(); }
  const Attr *attr(const std::string &name) const;
  std::optional<Expr> dimAttr(const std::string &name) const;
  bool boolAttr(const std::string &name, bool dflt) const;
  std::optional<double> realAttr(const std::string &name) const;
  std::string enumAttr(const std::string &name, llvm::StringRef dflt) const;
};

/// Straight-line SSA code with arguments and yielded values.
struct Block {
  std::vector<std::unique_ptr<Value>> args;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<Value *> yields;
};

/// Per-region totals written by the cost model (one layer for `layer`).
struct RegionSummary {
  std::vector<std::pair<std::string, Expr>> entries; ///< printed in this order
  std::optional<Expr> get(llvm::StringRef key) const;
};

struct Region {
  explicit Region(RegionKind kind) : kind(kind) {}
  RegionKind kind;
  Expr repeat = 1; ///< number of repetitions (layer region)
  /// Where the region is declared (the layer region: its repeat count);
  /// the verifier's errors about the region point here.
  llvm::SMLoc loc;
  Block fwd;
  std::optional<Block> bwd; ///< present after the backward pass
  std::optional<RegionSummary> summary;
};

struct Assumption {
  Expr dividend, divisor; ///< dividend % divisor == 0
};

/// The schedules `lr_decay` names: cosine, linear, constant, wsd.
inline bool isLrDecay(llvm::StringRef s) {
  return s == "cosine" || s == "linear" || s == "constant" || s == "wsd";
}

/// Training hyper-parameters from the `train { }` section.
struct TrainConfig {
  int64_t globalBatch = 0; ///< 0 = not given
  std::string optimizer = "adamw";
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.95, weightDecay = 0.1, eps = 1e-8;
  double gradClip = 1.0;
  int64_t warmupSteps = 0;
  /// The learning rate after warmup: "cosine" (the default) or "linear"
  /// decay to minLr over the rest of the run, "constant", or "wsd" (warmup,
  /// stable, decay: lr until the last decayFraction of the steps after
  /// warmup, then linear decay to minLr). The run's length is the trainer's
  /// --steps.
  std::string lrDecay = "cosine";
  std::optional<double> minLr;         ///< unset: a tenth of lr
  std::optional<double> decayFraction; ///< wsd only; unset: 0.2
  double minLrValue() const { return minLr ? *minLr : 0.1 * lr; }
  double decayFractionValue() const { return decayFraction ? *decayFraction : 0.2; }
  DType dtype = DType::BF16;      ///< parameters and activations
  DType masterDtype = DType::F32; ///< master weights and optimizer state
  /// Weight gradients, as accumulated over micro-batches and reduced over
  /// dp; unset means the master dtype (bf16 training with fp32 gradients,
  /// as Megatron-LM does for bf16), or the weights' dtype where that is wider.
  std::optional<DType> gradDtype;
  /// Weight decay by kind of parameter (`no_decay` in the optimizer's
  /// settings): biases, norm weights and biases, and embedding tables
  /// (token, position, and an LM head tied to the embedding) are not
  /// decayed by default, as Megatron-LM and Hugging Face's Trainer do for
  /// the first two and the language's default adds the third; every other
  /// weight is.
  bool decayBiases = false, decayNorms = false, decayEmbeddings = false;
  /// The no_decay list as the language writes it: "bias,norm,embedding".
  std::string noDecayText() const;
  /// The cluster the train section names (`cluster = "a100-40g"`): a preset,
  /// or a YAML file resolved against the .mist file's folder; empty: none.
  /// --cluster overrides it.
  std::string cluster;
  llvm::SMLoc clusterLoc; ///< where the train section names it
  /// Where the train section sets dtype, grad_dtype and master_dtype (none
  /// when it does not, or for IR input).
  llvm::SMLoc dtypeLoc, gradDtypeLoc, masterDtypeLoc;
  llvm::SMLoc loc; ///< the train section (none when the model has none)
  DType gradientDtype() const {
    if (gradDtype)
      return *gradDtype;
    return dtypeBytes(masterDtype) >= dtypeBytes(dtype) ? masterDtype : dtype;
  }
};

/// What has been done to the module; passes check and set these.
struct ModuleState {
  bool shaped = false, tpSharded = false, differentiated = false, costed = false;
  /// Sequence parallelism applied (the trainer's module for such a plan).
  bool sequenceSplit = false;
};

class Module {
public:
  std::string name;
  llvm::SMLoc loc; ///< where the .mist file declares the model instance (none for IR input)
  llvm::SMRange instanceRange; ///< the instance's template call (none for IR input)
  SymbolTable symbols;
  std::vector<Assumption> assumptions;
  TrainConfig train;
  std::vector<std::unique_ptr<Value>> inputs;
  Region pre{RegionKind::Pre}, layer{RegionKind::Layer}, post{RegionKind::Post};
  ModuleState state;

  Region *regions[3] = {&pre, &layer, &post};

  /// A module-unique value name derived from `base` (base, base.1, ...).
  std::string uniqueName(const std::string &base);
  /// Claims an exact name (IR parser); false when it is already taken.
  bool reserveName(const std::string &name);
  /// Records `dividend % divisor == 0` unless an identical fact is present.
  void assume(const Expr &dividend, const Expr &divisor);
  /// Removes every op cost and region summary and clears `costed`: a pass
  /// that rewrites ops calls it so no cost of the old ops is printed or used.
  void dropCosts();
  /// Removes every backward block and clears `differentiated` (and the
  /// costs), giving the gradients' names back, so that a pass can rewrite
  /// the forward (sequence-parallel) and backward derive them again under
  /// the same names.
  void dropBackward();

private:
  std::set<std::string> usedNames; ///< shrinks only in dropBackward
  /// Per base name, the suffix to try first: every smaller one is taken
  /// (dropBackward, which gives names back, clears the hints), so
  /// uniqueName stays linear overall.
  std::map<std::string, unsigned> nextSuffix;
};

} // namespace mist
