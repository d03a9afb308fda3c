//===- TrainerEmitter.cpp - Writes train.cu for a plan --------------------===//
#include "backend/trainer/TrainerEmitter.h"

#include "llvm/Support/Path.h"

#include "backend/trainer/FusedOps.h"
#include "backend/trainer/ScratchPlanner.h"
#include "backend/trainer/TrainerOpCall.h"
#include "backend/trainer/TrainerSizes.h"
#include "backend/trainer/TrainerStageUse.h"
#include "backend/trainer/TrainerSteps.h"
#include "format/Limits.h"
#include "ir/Printer.h"
#include "schedule/Schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <optional>
#include <set>

using namespace mist;

namespace {

/// "layers 4-7", or interleaved "layers 0-3, 8-11" (the stage's chunks).
std::string stageLayers(const Plan &plan, int i) {
  std::string text = "layers";
  for (int c = 0; c < std::max(1, plan.virtualStages); ++c) {
    const ChunkPlace place = chunkPlace(plan, i, c);
    text += fmt::format("{} {}-{}", c ? "," : "", place.firstLayer,
                        place.firstLayer + place.layers - 1);
  }
  return text;
}

/// Each buffer's IR name as a C++ identifier ("layer.ln1.weight" ->
/// layer_ln1_weight), unique within the stage: what train.cu calls it.
std::vector<std::string> bufferIdentifiers(const LoweredStage &st) {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const LoweredBuffer &b : st.buffers) {
    std::string id;
    for (char c : b.name)
      id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0])))
      id = "b_" + id;
    std::string unique = id;
    for (int k = 2; taken.count(unique); ++k)
      unique = fmt::format("{}_{}", id, k);
    taken.insert(unique);
    out.push_back(unique);
  }
  return out;
}

class Emitter {
public:
  Emitter(const Module &m, const LoweredStage &st, llvm::raw_ostream &os)
      : m(m), st(st), os(os), idents(bufferIdentifiers(st)),
        sizes(m.symbols, st.microBatch, st.tp) {
    const LoweredRegion &layer = st.region(RegionKind::Layer);
    for (const auto *ops : {&layer.forward, &layer.backward})
      for (const LoweredOp &op : *ops) {
        layerOwned.insert(op.operands.begin(), op.operands.end());
        layerOwned.insert(op.results.begin(), op.results.end());
      }
    layerOwned.insert(layer.inputs.begin(), layer.inputs.end());
    layerOwned.insert(layer.gradInputs.begin(), layer.gradInputs.end());
    for (size_t i = 0; i < st.buffers.size(); ++i)
      refs.push_back(ref(int(i)));
  }

  /// `G.at(buf::x)` or `L.at(buf::ln1)`: a buffer of the global frame or
  /// of this layer's, by its name in the stage's `buf` enumeration.
  std::string ref(int i) const {
    bool ids = st.buffers[i].dtype == DType::I32;
    return fmt::format("{}.{}({})", frameOf(i), ids ? "ids" : "at", named(i));
  }
  const char *frameOf(int i) const { return layerOwned.count(i) ? "L" : "G"; }
  std::string named(int i) const { return "buf::" + idents.at(size_t(i)); }
  /// A buffer's element count and shape in the module's symbols, and a size
  /// as train.cu writes it (`b*s*hidden`).
  Expr elements(int i) const { return st.buffers[i].symbolicElements(); }
  const std::vector<Expr> &dims(int i) const { return st.buffers[i].dims; }
  std::string sz(const Expr &e) { return sizes.text(e); }
  std::string n(int i) { return sz(elements(i)); }
  /// A parameter's full (tp = 1) shape: `{hidden, 3*hidden}`.
  std::string fullShape(int i) {
    GiNaC::exmap untiled;
    if (const Symbol *tp = m.symbols.ofKind(SymbolKind::TP))
      untiled[tp->sym] = 1;
    std::vector<std::string> out;
    for (const Expr &d : dims(i))
      out.push_back(sz(d.subs(untiled)));
    return fmt::format("{}", fmt::join(out, ", "));
  }
  /// The stage's micro-batch or tp by its symbol (`b`), or its value when the
  /// model has no such symbol.
  std::string knob(SymbolKind kind, int64_t value) {
    const Symbol *s = m.symbols.ofKind(kind);
    return s ? sz(s->sym) : std::to_string(value);
  }

  std::string irLine(const LoweredOp &op) const {
    auto names = [&](const std::vector<int> &ids) {
      std::string s;
      for (int i : ids)
        s += (s.empty() ? "%" : ", %") + st.buffers[i].name;
      return s;
    };
    return fmt::format("{} = {} {}", names(op.results), opName(op.kind), names(op.operands));
  }

  /// A region function. Each buffer of `releaseAfterLastRead` (saved
  /// activations no later function reads) is freed right after the op that
  /// reads it last, as the performance model's liveness assumes.
  /// In a layer's forward, `recomputed` (the activations a checkpointed
  /// layer's backward recomputes) are released after their last use only
  /// when the frame says so (Frame::releaseIfRecomputed); of them,
  /// `selective` (what selective recomputation writes again) also in a
  /// layer that recomputes selectively.
  /// `allocatedAtWrite` (what the run hands to the next one, and what a
  /// checkpointed layer drops) gets memory right before the op that writes
  /// it, when it has none (Frame::allocate).
  bool function(const std::string &name, const std::vector<LoweredOp> &ops,
                const std::vector<int> &outputs, DiagnosticEngine &diag,
                const std::set<int> &releaseAfterLastRead = {},
                const std::set<int> &recomputed = {}, const std::set<int> &allocatedAtWrite = {},
                const std::set<int> &selective = {}) {
    std::map<int, size_t> lastRead, lastUse, firstWrite;
    for (size_t i = ops.size(); i-- > 0;)
      for (int b : ops[i].results)
        if (allocatedAtWrite.count(b))
          firstWrite[b] = i;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (int b : ops[i].operands) {
        if (releaseAfterLastRead.count(b))
          lastRead[b] = i;
        if (recomputed.count(b))
          lastUse[b] = i;
      }
      for (int b : ops[i].results)
        if (recomputed.count(b))
          lastUse[b] = i;
    }
    std::string body;
    // Pairs run as one call (FusedOps.h); the frame work of both ops goes
    // before (allocations) and after (releases) that call.
    const std::vector<bool> fused = fusedWithNext(ops, outputs);
    for (size_t i = 0; i < ops.size(); ++i) {
      const LoweredOp &op = ops[i];
      const size_t span = fused[i] ? 2 : 1;
      std::string text;
      if (span == 2 && !fusedRuntimeOpCall(op, ops[i + 1], {st, refs, sizes}, text)) {
        diag.error({}, fmt::format("no fused call for '{}' and '{}'", opName(op.kind).str(),
                                   opName(ops[i + 1].kind).str()));
        return false;
      }
      if (span == 1 && !runtimeOpCall(op, {st, refs, sizes}, text)) {
        diag.error(
            {}, fmt::format("the trainer cannot run '{}' on CPU ranks yet", opName(op.kind).str()));
        return false;
      }
      auto inSpan = [&](size_t at) { return at >= i && at < i + span; };
      for (auto [b, at] : firstWrite)
        if (inSpan(at))
          body += fmt::format("  {}.allocate({}, {});\n", frameOf(b), named(b), n(b));
      for (size_t k = i; k < i + span; ++k)
        body += "  // " + irLine(ops[k]) + "\n";
      body += "  " + text + "\n";
      std::vector<std::string> released;
      for (auto [b, at] : lastRead)
        if (inSpan(at))
          released.push_back(fmt::format("{}.release({});", frameOf(b), named(b)));
      if (!released.empty())
        body += fmt::format("  {} // last read\n", fmt::join(released, " "));
      std::vector<std::string> dropped;
      for (auto [b, at] : lastUse)
        if (inSpan(at))
          dropped.push_back(
              selective.count(b)
                  ? fmt::format("L.releaseIfRecomputed({}, /*selectively=*/true);", named(b))
                  : fmt::format("L.releaseIfRecomputed({});", named(b)));
      if (!dropped.empty())
        body += fmt::format("  {} // last forward use; recomputed if checkpointed\n",
                            fmt::join(dropped, " "));
      i += span - 1;
    }
    // Every region function has the same signature; a frame it does not
    // touch keeps its parameter unnamed.
    auto param = [&](const char *type, const char *name) {
      bool used = body.find(std::string(name) + ".") != std::string::npos;
      return fmt::format("{} &{}", type, used ? name : fmt::format("/*{}*/", name));
    };
    os << fmt::format("void {}({}, {}, {}) {{\n", name, param("Frame", "G"), param("Frame", "L"),
                      param("TpContext", "C"))
       << body << "}\n\n";
    return true;
  }

  const Module &m;
  const LoweredStage &st;
  llvm::raw_ostream &os;
  std::set<int> layerOwned;
  std::vector<std::string> idents; ///< per buffer: its name in `buf`
  TrainerSizes sizes;              ///< the stage's sizes, as train.cu writes them
  std::vector<std::string> refs;   ///< per buffer: ref(i), what its op calls pass
};

} // namespace

namespace {

std::string joined(const std::vector<int64_t> &values) {
  std::string s;
  for (int64_t v : values)
    s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

const char *boolean(bool b) { return b ? "true" : "false"; }

/// The region functions' names: [pre, layer, post][forward, backward].
constexpr const char *regionFunctions[3][2] = {{"preForward", "preBackward"},
                                               {"layerForward", "layerBackward"},
                                               {"postForward", "postBackward"}};

/// Whether stage `first`/`last` runs region r (0 pre, 1 layer, 2 post).
bool runsRegion(int r, bool first, bool last) { return !(r == 0 && !first) && !(r == 2 && !last); }

/// Plans and models the trainer cannot run are errors; a plan priced for
/// another precision than the trainer's fp32 gets a warning.
bool checkTrainable(const Module &m, DiagnosticEngine &diag) {
  for (const Region *r : m.regions)
    for (const auto &op : r->fwd.ops)
      if (op->kind == OpKind::Dropout && op->realAttr("p").value_or(0) > 0) {
        diag.error(op->loc, "the trainer does not run dropout with p > 0 yet");
        return false;
      } else if (op->kind == OpKind::CrossEntropy && !op->boolAttr("fused", true)) {
        // The unfused form is priced for comparing with frameworks that
        // run it; the trainer's loss kernel is the fused one.
        diag.error(op->loc, "the trainer computes cross_entropy fused: remove `fused = false` "
                            "(the unfused form is for pricing runs of frameworks that upcast "
                            "the logits, docs/perf-model.md)");
        return false;
      }
  // The runtime stores fp32 and bf16 tensors (runtime/device/DType.h) and
  // keeps fp32 masters and moments; f16 would need dynamic loss scaling,
  // which it does not have.
  // Located at the train section's key where it names the dtype.
  const TrainConfig &train = m.train;
  struct Choice {
    const char *key;
    DType type;
    llvm::SMLoc at;
  };
  for (const Choice &c :
       {Choice{"dtype", train.dtype, train.dtypeLoc},
        Choice{"grad_dtype", train.gradientDtype(),
               train.gradDtypeLoc.isValid() ? train.gradDtypeLoc : train.dtypeLoc}})
    if (c.type != DType::F32 && c.type != DType::BF16) {
      diag.error(c.at.isValid() ? c.at : train.loc,
                 fmt::format("the trainer runs {0} = f32 or bf16, not {1} ({1} training needs "
                             "dynamic loss scaling, which the trainer does not do yet): put "
                             "`{0} = bf16` in the model's train section",
                             c.key, dtypeName(c.type).str()));
      return false;
    }
  if (m.train.masterDtype != DType::F32) {
    diag.error(train.masterDtypeLoc.isValid() ? train.masterDtypeLoc : train.loc,
               fmt::format("the trainer keeps fp32 master weights and Adam moments, not "
                           "master_dtype = {}: remove master_dtype from the train section "
                           "(f32 is its default)",
                           dtypeName(m.train.masterDtype).str()));
    return false;
  }
  // train.cu holds these as float and int: a value that would not survive
  // (textual IR skips the .mist's checks) is refused, never narrowed.
  const TrainConfig &t = m.train;
  for (auto [key, v] : {std::pair{"lr", t.lr},
                        {"eps", t.eps},
                        {"weight_decay", t.weightDecay},
                        {"grad_clip", t.gradClip},
                        {"min_lr", t.minLr.value_or(0)},
                        {"decay_fraction", t.decayFraction.value_or(0)}})
    if (!std::isfinite(v) || !limits::fitsFloat(v)) {
      diag.error({}, fmt::format("train.{} = {} does not fit the trainer's 32-bit float", key,
                                 formatReal(v)));
      return false;
    }
  if (t.warmupSteps < 0 || t.warmupSteps > limits::maxSteps) {
    diag.error({}, fmt::format("train.warmup_steps = {} is outside 0..{}", t.warmupSteps,
                               limits::maxSteps));
    return false;
  }
  return true;
}

/// The comment block on top: the plan, how to build, run and edit.
void emitHeader(const Module &m, const Plan &plan, const TrainerSource &src,
                llvm::raw_ostream &os) {
  const int stages = static_cast<int>(plan.stages.size());
  int ranks = 0;
  for (const StagePlan &sp : plan.stages)
    ranks += sp.dp * sp.tp;
  const std::string planSource =
      src.planFile.empty()
          ? fmt::format("a plan tuned for {} (not saved: pass --plan-out)", src.clusterName)
      : src.planTuned ? fmt::format("the plan {}, tuned for {}", src.planFile, src.clusterName)
                      : fmt::format("the plan {}, priced on {}", src.planFile, src.clusterName);
  // The file and program as the user named them (-o pp.cu: pp.cu and ./pp).
  std::string file = "train.cu", program = "train";
  if (!src.outputFile.empty() && src.outputFile != "-") {
    file = std::string(llvm::sys::path::filename(src.outputFile));
    const std::string stem(llvm::sys::path::stem(file));
    if (!stem.empty() && stem != file)
      program = stem;
  }
  os << fmt::format("// {} for {}, generated by mistc from {} and {}.\n", file, m.name,
                    src.modelFile, planSource);
  os << fmt::format(
      "// Plan: {} stage{}, {} micro-batch{} per step (global batch {}), {} rank{}.\n", stages,
      stages == 1 ? "" : "s", plan.gradAccum, plan.gradAccum == 1 ? "" : "es", plan.globalBatch,
      ranks, ranks == 1 ? "" : "s");
  for (int i = 0; i < stages; ++i) {
    const StagePlan &sp = plan.stages[i];
    os << fmt::format("//   stage {}: {}, micro-batch {}, dp {}, tp {}, {} checkpointed, "
                      "{}, offload w {} g {} o {} a {}\n",
                      i, stageLayers(plan, i), sp.microBatch, sp.dp, sp.tp, sp.ckptLayers,
                      sp.zero.name(), sp.offload.weights, sp.offload.grads, sp.offload.optimizer,
                      sp.offload.activations);
  }
  if (src.predictedIterationSeconds > 0)
    os << fmt::format("// Predicted on {}: {:.6g} s per iteration (the pipeline formula the tuner "
                      "minimizes: docs/perf-model.md).\n",
                      src.deviceName, src.predictedIterationSeconds);
  os << fmt::format("// Precision: {} weights and activations, fp32 master weights and Adam "
                    "moments, {} gradients{}.\n",
                    dtypeName(m.train.dtype).str(), dtypeName(m.train.gradientDtype()).str(),
                    m.train.dtype == DType::BF16
                        ? "; every op computes in fp32 and rounds what it stores to bf16"
                        : " (TF32 GEMMs on GPUs)");
  os << "// Build for CPU ranks, against the runtime of the mistc that wrote this file (its\n"
        "// headers and libraries; mistc --print-build-flags prints them):\n";
  os << fmt::format("//   mpicxx -std=c++20 -O2 -DMIST_CPU -x c++ {} -x none $(mistc "
                    "--print-build-flags) -o {}\n",
                    file, program);
  os << fmt::format(
      "// Build for a GPU, in mistc's source tree (BUILD: a build of it with CUDA, e.g.\n"
      "// -DMIST_RUNTIME_ONLY=ON): scripts/compile-trainer.sh gpu {} BUILD {}\n",
      file, program);
  os << fmt::format("// Run: mpirun -np {} ./{} --steps 20 [--data tokens.bin | --data-path "
                    "PREFIX] [--ckpt-dir DIR [--resume]] [--init-from DIR] (./{} --help lists "
                    "every flag; docs/launch.md)\n",
                    ranks, program, program);
  os << "// Editing: the training hyper-parameters (lr, betas, eps, weight decay, gradient "
        "clipping,\n"
        "// warmup) are the spec.* lines at the end of main(); change one and rebuild with the "
        "line\n"
        "// above. Each stage's code names its buffers (sN::buf) and writes every size in the\n"
        "// model's symbols, declared once per stage (constexpr int64_t b = ..., s = ...). The\n"
        "// sizes, the stage tables and the schedule follow from the plan, so to change the "
        "model,\n"
        "// the batch or the parallelism, edit the .mist file or the plan and run mistc again.\n\n";
}

/// One stage as the emitter sees it while writing its code and tables.
struct StageContext {
  StageContext(const Module &m, const Plan &plan, int i, const LoweredStage &st,
               llvm::raw_ostream &os)
      : train(m.train), plan(plan), i(i), sp(plan.stages[i]), st(st), first(i == 0),
        last(i + 1 == int(plan.stages.size())), use(stageUse(st, first, last)),
        params(stageParams(st, use)), e(m, st, os) {
    // Saved activations by the backward that reads them last: a layer's
    // own; the global ones pre's backward reads; the rest post's.
    for (int b : use.saved) {
      if (isParameterBuffer(params, b))
        continue;
      const int r = e.layerOwned.count(b) ? 1 : first && reads(pre(), b) ? 0 : 2;
      savedBy[r].insert(b);
    }
  }
  const LoweredRegion &pre() const { return st.region(RegionKind::Pre); }
  const LoweredRegion &layer() const { return st.region(RegionKind::Layer); }
  const LoweredRegion &post() const { return st.region(RegionKind::Post); }

  const TrainConfig &train;
  const Plan &plan;
  const int i;
  const StagePlan &sp;
  const LoweredStage &st;
  const bool first, last;
  const StageUse use;
  const std::vector<StageParam> params;
  Emitter e;
  std::set<int> savedBy[3];
};

/// `namespace buf`: every buffer of the stage by name.
void emitBufferNames(const StageContext &c, llvm::raw_ostream &os) {
  os << "// The stage's buffers, by their IR names: G.at(buf::x) in the global frame, L.at(...)\n"
        "// in the frame of the layer being computed.\nnamespace buf {\nenum : int {\n";
  for (size_t b = 0; b < c.st.buffers.size(); ++b)
    os << fmt::format("  {} = {},\n", c.e.idents[b], b);
  os << "};\n} // namespace buf\n\n";
}

/// The forward and backward function of every region the stage runs.
bool emitRegionFunctions(StageContext &c, DiagnosticEngine &diag, llvm::raw_ostream &os) {
  // Each backward also frees the gradient handed to it once read (an
  // array of its own: see the scratch planning in emitStageTable).
  std::set<int> releasedBy[3] = {c.savedBy[0], c.savedBy[1], c.savedBy[2]};
  releasedBy[1].insert(c.layer().gradInputs.begin(), c.layer().gradInputs.end());
  if (c.first)
    releasedBy[0].insert(c.pre().gradInputs.begin(), c.pre().gradInputs.end());
  const std::string prefix = fmt::format("s{}_", c.i);
  for (int r = 0; r < 3; ++r) {
    if (!runsRegion(r, c.first, c.last))
      continue;
    const LoweredRegion &lr = c.st.regions[r];
    os << fmt::format("// ---- {} ----\n", regionName(lr.kind));
    // Handed to the next run: allocated at write, moved out after the run.
    std::set<int> fwdOut(lr.outputs.begin(), lr.outputs.end()),
        bwdOut(lr.gradOutputs.begin(), lr.gradOutputs.end());
    if (r == 2)
      fwdOut.clear(); // the loss stays in post's frame
    const std::set<int> recomputed =
        r == 1 ? recomputedByCheckpoint(c.st, c.savedBy[1]) : std::set<int>{};
    fwdOut.insert(recomputed.begin(), recomputed.end());
    const std::vector<int> selectiveList = r == 1 && c.plan.selectiveRecompute
                                               ? selectivelyRecomputed(c.st, recomputed)
                                               : std::vector<int>{};
    const std::set<int> selective(selectiveList.begin(), selectiveList.end());
    if (!c.e.function(prefix + regionFunctions[r][0], lr.forward, lr.outputs, diag, {}, recomputed,
                      fwdOut, selective) ||
        !c.e.function(prefix + regionFunctions[r][1], lr.backward, lr.gradOutputs, diag,
                      releasedBy[r], {}, bwdOut))
      return false;
    if (!selective.empty()) {
      // Selective recomputation: the forward ops that write them, again.
      std::vector<LoweredOp> again;
      for (const LoweredOp &op : lr.forward)
        if (!op.results.empty() && selective.count(op.results[0]))
          again.push_back(op);
      if (!c.e.function(prefix + "layerRecomputeSelective", again, {}, diag, {}, {}, selective))
        return false;
    }
  }
  return true;
}

/// The stage's scratch arenas: what is neither a parameter (or its
/// gradient) nor kept from a forward to its backward shares one arena per
/// run, planned by liveness.
ScratchPlan stageScratch(const StageContext &c) {
  std::vector<bool> scratch(c.st.buffers.size(), false);
  for (size_t b = 0; b < c.st.buffers.size(); ++b)
    scratch[b] = c.use.buffers.count(int(b)) && !c.use.saved.count(int(b));
  for (const StageParam &p : c.params) {
    scratch[size_t(p.buffer)] = false;
    for (int64_t g : p.grads)
      scratch[size_t(g)] = false;
  }
  // What the runtime hands from one run to the next (the activation
  // between regions, and its gradient) gets an array of its own, which it
  // moves instead of copying out of an arena (StageRunner::handIn/handOut).
  const LoweredRegion &pre = c.pre(), &layer = c.layer(), &post = c.post();
  for (const std::vector<int> *carried : {&layer.outputs, &layer.gradInputs, &layer.gradOutputs,
                                          &pre.outputs, &pre.gradInputs, &post.gradOutputs})
    for (int b : *carried)
      scratch[size_t(b)] = false;
  return planScratch(c.st, scratch, c.first, c.last);
}

/// `spec.buffers`: one designated initializer per buffer.
void emitBufferTable(StageContext &c, const ScratchPlan &arena, llvm::raw_ostream &os) {
  os << "  spec.buffers = {\n";
  for (size_t b = 0; b < c.st.buffers.size(); ++b) {
    const LoweredBuffer &buf = c.st.buffers[b];
    const bool used = c.use.buffers.count(int(b)) > 0;
    // Fields left out keep their defaults (false, -1: see BufferSpec).
    std::string fields =
        fmt::format(".name = \"{}\", .elements = {}, .kind = BufferKind::{}", buf.name,
                    used ? c.e.n(int(b)) : "0", buf.dtype == DType::I32 ? "Ids" : "Float");
    const std::string typeField =
        buf.dtype == DType::BF16 ? std::string(", .dtype = DType::BF16") : std::string();
    if (c.e.layerOwned.count(int(b)))
      fields += ", .layer = true";
    if (used && c.use.forward.count(int(b)))
      fields += ", .forward = true";
    if (used && c.use.saved.count(int(b)))
      fields += ", .saved = true";
    if (arena.run[b] >= 0)
      fields +=
          fmt::format(", .scratchRun = {}, .scratchOffset = {}", arena.run[b], arena.offset[b]);
    fields += typeField; // f32 is the default
    os << fmt::format("      {{{}}},{}\n", fields, used ? "" : " // not on this stage");
  }
  os << "  };\n";
}

/// `spec.params`: each parameter with its gradients, layout and regions.
void emitParamTable(StageContext &c, llvm::raw_ostream &os) {
  os << "  spec.params = {\n";
  for (const StageParam &sp : c.params) {
    const ParamLayout &p = *sp.layout;
    const bool inPre = reads(c.pre(), sp.buffer), inPost = reads(c.post(), sp.buffer);
    std::vector<std::string> regions;
    if (c.first && inPre)
      regions.push_back("RegionKind::Pre");
    if (reads(c.layer(), sp.buffer))
      regions.push_back("RegionKind::Layer");
    if (c.last && inPost)
      regions.push_back("RegionKind::Post");
    const bool tied = c.plan.stages.size() > 1 && inPre && inPost;
    std::vector<std::string> gradNames;
    bool partialGrad = false; // sequence parallelism's norms and position table
    for (int64_t g : sp.grads) {
      gradNames.push_back(c.e.named(int(g)));
      partialGrad |= c.st.buffers[size_t(g)].partial;
    }
    const ParamKind kind = paramKindOf(c.st, sp.buffer);
    const bool decays = kind == ParamKind::Bias        ? c.train.decayBiases
                        : kind == ParamKind::Norm      ? c.train.decayNorms
                        : kind == ParamKind::Embedding ? c.train.decayEmbeddings
                                                       : true;
    os << fmt::format("      {{.name = \"{}\", .buffer = {}, .grads = {{{}}}, .shape = {{{}}}, "
                      ".shardAxis = {}, .groups = {{{}}}, .regions = {{{}}}{}{}{}}},\n",
                      p.name, c.e.named(sp.buffer), fmt::join(gradNames, ", "),
                      c.e.fullShape(sp.buffer), p.shardAxis, joined(p.groups),
                      fmt::join(regions, ", "), tied ? ", .tiedAcrossStages = true" : "",
                      partialGrad ? ", .tpPartialGrad = true" : "",
                      decays ? "" : ", .decay = false");
  }
  os << "  };\n";
}

/// `stageN()`: the knobs, tables, region functions and 1F1B order the
/// runtime reads.
void emitStageTable(StageContext &c, llvm::raw_ostream &os) {
  const StagePlan &sp = c.sp;
  const int i = c.i;
  os << fmt::format("StageSpec stage{}() {{\n  StageSpec spec;\n", i);
  const int chunks = std::max(1, c.plan.virtualStages);
  const ChunkPlace first = chunkPlace(c.plan, i, 0);
  os << fmt::format(
      "  spec.firstLayer = {};\n  spec.layers = {};\n  spec.microBatch = {};\n  spec.dp = {};\n"
      "  spec.tp = {};\n  spec.ckptLayers = {};\n"
      "  spec.mesh = {{.nodes = {}, .gpusPerNode = {}}}; // where the plan put the stage\n",
      first.firstLayer, sp.layers(), c.e.knob(SymbolKind::Batch, sp.microBatch), sp.dp,
      c.e.knob(SymbolKind::TP, sp.tp), sp.ckptLayers, sp.meshNodes, sp.meshGpusPerNode);
  if (chunks > 1)
    os << fmt::format("  spec.chunks = {}; // model chunks of {} layer{}, {} layers apart\n"
                      "  spec.chunkStride = {};\n",
                      chunks, first.layers, first.layers == 1 ? "" : "s",
                      chunkPlace(c.plan, i, 1).firstLayer - first.firstLayer,
                      chunkPlace(c.plan, i, 1).firstLayer - first.firstLayer);
  os << fmt::format(
      "  spec.zeroOptimizer = {};\n  spec.zeroGrads = {};\n  spec.zeroWeights = {};\n",
      boolean(sp.zero.optimizer), boolean(sp.zero.grads), boolean(sp.zero.weights));
  os << fmt::format(
      "  spec.offloadWeights = {};\n  spec.offloadGrads = {};\n  spec.offloadOptimizer = {};\n"
      "  spec.offloadActivations = {};\n",
      sp.offload.weights, sp.offload.grads, sp.offload.optimizer, sp.offload.activations);
  const ScratchPlan arena = stageScratch(c);
  os << fmt::format("  spec.scratchBytes = {{{}}}; // arena bytes: pre F, pre B, layer F, layer B, "
                    "post F, post B\n",
                    fmt::join(arena.bytes, ", "));
  emitBufferTable(c, arena, os);
  emitParamTable(c, os);
  if (c.plan.selectiveRecompute) {
    const std::vector<int> selective =
        selectivelyRecomputed(c.st, recomputedByCheckpoint(c.st, c.savedBy[1]));
    std::vector<std::string> names;
    for (int b : selective)
      names.push_back(c.e.named(b));
    os << "  spec.selectiveRecompute = true; // norms and activation functions again\n";
    os << fmt::format("  spec.selectiveBuffers = {{{}}};\n", fmt::join(names, ", "));
    if (!selective.empty())
      os << fmt::format("  spec.layerRecomputeSelective = s{}_layerRecomputeSelective;\n", i);
  }
  const LoweredRegion &pre = c.pre(), &layer = c.layer(), &post = c.post();
  auto io = [&](const char *field, int value, bool present) {
    os << fmt::format("  spec.{} = {};\n", field, present ? c.e.named(value) : "-1");
  };
  io("tokensBuffer", c.st.moduleInputs[0], c.first);
  io("targetsBuffer", c.st.moduleInputs[1], c.last);
  io("lossBuffer", post.outputs.at(0), c.last);
  io("preOut", pre.outputs.at(0), c.first);
  io("layerIn", layer.inputs.at(0), true);
  io("layerOut", layer.outputs.at(0), true);
  io("postIn", post.inputs.at(0), c.last);
  io("postGradIn", post.gradInputs.at(0), c.last);
  io("postGradOut", post.gradOutputs.at(0), c.last);
  io("layerGradIn", layer.gradInputs.at(0), true);
  io("layerGradOut", layer.gradOutputs.at(0), true);
  io("preGradIn", pre.gradInputs.at(0), c.first);
  if (c.last) { // post's saved activations that no pre backward reads: freed after post's backward
    std::vector<std::string> freed;
    for (int b : c.savedBy[2])
      freed.push_back(c.e.named(b));
    os << fmt::format("  spec.freedAfterPostBackward = {{{}}};\n", fmt::join(freed, ", "));
  }
  for (int r = 0; r < 3; ++r)
    if (runsRegion(r, c.first, c.last))
      os << fmt::format("  spec.{0} = s{1}_{0};\n  spec.{2} = s{1}_{2};\n", regionFunctions[r][0],
                        i, regionFunctions[r][1]);
  os << fmt::format("  spec.iteration = s{}_iteration;\n", i);
  os << "  return spec;\n}\n\n";
}

/// What main() needs from the stages: the sequence length and the vocabulary
/// (this rank's logits are a slice of it when the loss is vocab-parallel).
void stageSizes(const StageContext &c, int64_t &seqLen, int64_t &vocab) {
  seqLen = c.st.buffers[c.st.moduleInputs[0]].shape[1];
  if (c.last)
    for (const LoweredOp &op : c.post().forward)
      if (op.kind == OpKind::CrossEntropy) {
        auto vp = op.words.find("vocab_parallel");
        vocab = c.st.buffers[op.operands[0]].shape.back() *
                (vp != op.words.end() && vp->second == "true" ? c.sp.tp : 1);
      }
}

/// main(): the stages and the training setup handed to runTrainer.
void emitMain(const Module &m, const Plan &plan, const TrainerSource &src, int64_t seqLen,
              int64_t vocab, llvm::raw_ostream &os) {
  const int stages = static_cast<int>(plan.stages.size());
  os << "int main(int argc, char **argv) {\n  TrainerSpec spec;\n";
  std::string planText;
  for (int i = 0; i < stages; ++i)
    planText += fmt::format("{}dp {} tp {} b {}", i ? " | " : "", plan.stages[i].dp,
                            plan.stages[i].tp, plan.stages[i].microBatch);
  os << fmt::format("  spec.model = \"{}\";\n  spec.plan = \"{} stage{}: {}, G = {}\";\n", m.name,
                    stages, stages == 1 ? "" : "s", planText, plan.gradAccum);
  std::string stageCalls;
  for (int i = 0; i < stages; ++i)
    stageCalls += fmt::format("{}s{}::stage{}()", i ? ", " : "", i, i);
  os << "  spec.stages = {" << stageCalls << "};\n";
  const TrainConfig &t = m.train;
  os << fmt::format("  spec.seqLen = {};\n  spec.vocab = {};\n  spec.gradAccum = {};\n"
                    "  spec.modelFlopsPerSample = {};\n",
                    seqLen, vocab, plan.gradAccum, src.modelFlopsPerSample);
  if (m.state.sequenceSplit)
    os << "  spec.sequenceParallel = true; // activations split along the tokens over tp\n";
  if (src.predictedIterationSeconds > 0)
    os << fmt::format("  spec.predictedStepSeconds = {:g}; // the plan's, for --log-dir\n",
                      src.predictedIterationSeconds);
  os << fmt::format("  spec.device = \"{}\";\n  spec.devicePeakTflops = {};\n", src.deviceName,
                    src.devicePeakTflops);
  os << fmt::format(
      "  spec.cluster = {{.name = \"{}\", .gpusPerNode = {}, .tpAcrossNodes = {}}};\n",
      src.clusterName, src.gpusPerNode, boolean(src.tpAcrossNodes));
  os << fmt::format(
      "  spec.lr = float({});\n  spec.beta1 = float({});\n  spec.beta2 = float({});\n"
      "  spec.eps = float({});\n  spec.weightDecay = float({});\n  spec.gradClip = float({});\n"
      "  spec.warmupSteps = {};\n",
      t.lr, t.beta1, t.beta2, t.eps, t.weightDecay, t.gradClip, t.warmupSteps);
  // The schedule after warmup, where the model's differs from the default
  // (cosine to a tenth of lr).
  if (t.lrDecay != "cosine") {
    std::string kind = t.lrDecay == "wsd" ? "Wsd" : t.lrDecay;
    kind[0] = char(std::toupper(static_cast<unsigned char>(kind[0])));
    os << fmt::format("  spec.lrDecay = LrDecay::{};\n", kind);
  }
  if (t.minLr)
    os << fmt::format("  spec.minLr = float({});\n", *t.minLr);
  if (t.decayFraction)
    os << fmt::format("  spec.decayFraction = float({});\n", *t.decayFraction);
  auto runtimeType = [](DType d) { return d == DType::BF16 ? "DType::BF16" : "DType::F32"; };
  os << fmt::format("  spec.weightDtype = {};\n  spec.gradDtype = {};\n", runtimeType(t.dtype),
                    runtimeType(t.gradientDtype()));
  os << "  return runTrainer(spec, argc, argv);\n}\n";
}

} // namespace

bool mist::emitTrainer(const Module &m, const Plan &plan, const TrainerSource &src,
                       DiagnosticEngine &diag, llvm::raw_ostream &os) {
  if (!checkTrainable(m, diag))
    return false;
  if (m.state.sequenceSplit != plan.sequenceParallel) {
    diag.error({}, plan.sequenceParallel
                       ? "a plan with sequence_parallel trains the module after the "
                         "sequence-parallel pass (passes/Pipeline.h, applySequenceParallel)"
                       : "a module after the sequence-parallel pass trains only a plan with "
                         "sequence_parallel");
    return false;
  }
  std::vector<LoweredStage> lowered;
  for (const StagePlan &sp : plan.stages) {
    auto st = lowerForStage(m, sp.microBatch, sp.tp, diag);
    if (!st)
      return false;
    lowered.push_back(std::move(*st));
  }
  emitHeader(m, plan, src, os);
  os << "#include \"runtime/ops/Ops.h\"\n#include \"runtime/trainer/StageRunner.h\"\n"
        "#include \"runtime/trainer/TpContext.h\"\n"
        "#include \"runtime/trainer/Trainer.h\"\n";
  if (plan.virtualStages > 1) // the interleaved order
    os << "#include \"schedule/Schedule.h\"\n";
  os << "\n";
  os << "using namespace mist::rt;\nusing namespace mist::rt::ops;\n\nnamespace {\n\n";
  int64_t seqLen = 0, vocab = 0;
  for (int i = 0; i < int(plan.stages.size()); ++i) {
    const StagePlan &sp = plan.stages[i];
    os << fmt::format("// ======== stage {}: {}, micro-batch {}, tp {} ========\n\n", i,
                      stageLayers(plan, i), sp.microBatch, sp.tp);
    os << fmt::format("namespace s{} {{\n\n", i);
    // The stage's code first, then the sizes it used, declared above it.
    std::string code;
    llvm::raw_string_ostream body(code);
    StageContext c(m, plan, i, lowered[i], body);
    emitBufferNames(c, body);
    if (!emitRegionFunctions(c, diag, body))
      return false;
    stageSizes(c, seqLen, vocab);
    emitStageSteps(plan, i, body);
    emitStageTable(c, body);
    std::string declared = c.e.sizes.declarations();
    if (!declared.empty())
      os << "// Sizes: the model's, at this stage's micro-batch and tensor-parallel degree.\n"
         << declared << "\n\n";
    os << body.str() << fmt::format("}} // namespace s{}\n\n", i);
  }
  os << "} // namespace\n\n";
  emitMain(m, plan, src, seqLen, vocab, os);
  return true;
}
