//===- Driver.cpp - The mistc command line --------------------------------===//
/// \file
/// mistc reads a .mist model (or textual IR with -x ir), runs the pass
/// pipeline and writes what --emit asks for, or what the output file's
/// extension says (`mistc model.mist -o train.cu` tunes a plan and writes the
/// trainer). Exit status: 0 on success, 1 after any diagnostic error, 2 for a
/// command line without an input.
//===----------------------------------------------------------------------===//
#include "MistVersion.h"
#include "backend/exports/HuggingFaceExport.h"
#include "backend/exports/HuggingFaceImport.h"
#include "backend/reports/Summary.h"
#include "format/Limits.h"
#include "frontend/Frontend.h"
#include "frontend/Vocabulary.h"
#include "ir/IRParser.h"
#include "ir/OpSemantics.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pipeline.h"
#include "support/InputFile.h"
#include "support/OutputFile.h"
#include "tools/mistc/Emit.h"
#include "tools/mistc/InstallLayout.h"
#include "tools/mistc/PlanActions.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <cmath>
#include <fmt/format.h>
#include <glpk.h>

using namespace mist;
namespace cl = llvm::cl;

namespace {

enum class InputKind { Mist, IR };
cl::OptionCategory category("mistc options");
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.mist | module.mir>"), cl::Required,
                               cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"), cl::cat(category));
cl::opt<InputKind> inputKind("x", cl::desc("input language (default: from the file extension)"),
                             cl::values(clEnumValN(InputKind::Mist, "mist", ".mist model source"),
                                        clEnumValN(InputKind::IR, "ir", "textual mistc IR")),
                             cl::cat(category));
cl::opt<Emit> emit(
    "emit", cl::desc("what to write (default: from -o's extension, else summary)"),
    cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::AST, "ast", "the parsed syntax tree"),
               clEnumValN(Emit::IR, "ir", "IR after shape-infer, tp-shard, backward"),
               clEnumValN(Emit::CostedIR, "costed-ir", "IR with symbolic costs"),
               clEnumValN(Emit::Summary, "summary", "parameters and per-layer costs"),
               clEnumValN(Emit::HuggingFace, "hf",
                          "a trainer checkpoint (--checkpoint) as a Hugging Face transformers "
                          "model folder (-o DIR): config.json and model.safetensors"),
               clEnumValN(Emit::Checkpoint, "checkpoint",
                          "a Hugging Face model folder (--from-hf) as a trainer checkpoint "
                          "folder (-o DIR) that ./train --init-from DIR starts from"),
               clEnumValN(Emit::Plan, "plan", "tune and write the plan (YAML)"),
               clEnumValN(Emit::Report, "report", "predicted figures of a plan"),
               clEnumValN(Emit::Timeline, "timeline",
                          "predicted stream timeline (Chrome trace JSON)"),
               clEnumValN(Emit::Schedule, "schedule",
                          "what every stage does, step by step and stream by stream"),
               clEnumValN(Emit::Megatron, "megatron", "Megatron-LM arguments for the plan"),
               clEnumValN(Emit::DeepSpeed, "deepspeed", "DeepSpeed JSON config for the plan"),
               clEnumValN(Emit::TorchTitan, "torchtitan",
                          "TorchTitan 0.3 config module (Python) for the plan"),
               clEnumValN(Emit::TimelineSvg, "timeline-svg",
                          "predicted stream timeline as an SVG picture"),
               clEnumValN(Emit::Lowered, "lowered",
                          "the IR at each stage's micro-batch and tp, sizes concrete"),
               clEnumValN(Emit::Trainer, "trainer", "train.cu: the trainer program for the plan"),
               clEnumValN(Emit::ProfileShapes, "profile-shapes",
                          "the (op, shape) pairs the performance model looks up in measured op "
                          "times, for tools/profiler")),
    cl::cat(category));
cl::list<std::string> passList("passes", cl::desc("run exactly these passes (comma-separated)"),
                               cl::CommaSeparated, cl::cat(category));
cl::list<std::string> printAfter("print-ir-after", cl::desc("print the IR after these passes"),
                                 cl::CommaSeparated, cl::cat(category));
cl::opt<bool> printAfterAll("print-ir-after-all", cl::desc("print the IR after every pass"),
                            cl::cat(category));
cl::opt<bool> verifyEach("verify-each", cl::desc("run the verifier after every pass"),
                         cl::cat(category));
cl::opt<bool> timePasses("time-passes", cl::desc("report the time of each pass"),
                         cl::cat(category));
cl::opt<bool> printBuildFlags(
    "print-build-flags",
    cl::desc("print the compiler flags that build an emitted train.cu for CPU ranks against this "
             "mistc's runtime (its include folder and libraries), and exit"),
    cl::cat(category));
cl::opt<bool> printVocabularyFlag(
    "print-vocabulary",
    cl::desc("print the language's keywords, built-in ops, shard words, element types and "
             "train and optimizer settings as JSON (from the compiler's own tables), and exit"),
    cl::cat(category));
cl::opt<bool> listPasses("list-passes", cl::desc("list the available passes and exit"),
                         cl::cat(category));
cl::list<std::string> importDirs("I", cl::desc("add a folder to the import path"), cl::Prefix,
                                 cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> stdlibDir("stdlib",
                               cl::desc("folder of the standard model library (default: the "
                                        "one this mistc ships, docs/install.md)"),
                               cl::cat(category));
cl::opt<std::string> modelName("model", cl::desc("model instance to compile (default: the last)"),
                               cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("override train.seq_len"), cl::init(0),
                        cl::cat(category));
cl::opt<std::string> clusterName("cluster",
                                 cl::desc("cluster preset name or YAML file (default: the train "
                                          "section's `cluster`, else preset host: this "
                                          "machine's CPU cores as ranks)"),
                                 cl::value_desc("name|file"), cl::cat(category));
cl::opt<int> nodes("nodes", cl::desc("number of nodes (overrides the cluster file)"), cl::init(0),
                   cl::cat(category));
cl::opt<std::string> checkpointPath(
    "checkpoint",
    cl::desc("--emit=hf: the trainer checkpoint to convert (its folder, or a safetensors file)"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> fromHfPath(
    "from-hf",
    cl::desc("--emit=checkpoint: the Hugging Face model folder (config.json, model.safetensors "
             "or its shards) to read"),
    cl::value_desc("DIR"), cl::cat(category));
cl::opt<std::string> planPath("plan", cl::desc("evaluate this plan instead of tuning"),
                              cl::value_desc("plan.yaml"), cl::cat(category));
cl::opt<std::string> planOut("plan-out",
                             cl::desc("write the tuned plan here too (a trainer's default: "
                                      "beside it, train.cu -> train.plan.yaml)"),
                             cl::value_desc("plan.yaml"), cl::cat(category));
cl::opt<std::string>
    space("space", cl::desc("search space: megatron, +zero, +ckpt, +offload, full, deepspeed"),
          cl::init("full"), cl::cat(category));
cl::opt<bool> force("force",
                    cl::desc("--emit=megatron|deepspeed|torchtitan: write the export even when "
                             "its plan does not fit in device memory"),
                    cl::cat(category));
cl::opt<std::string> projectedPlan(
    "projected-plan",
    cl::desc("--emit=megatron|deepspeed|torchtitan: also write the plan the export runs (the "
             "projection), to price or train it"),
    cl::value_desc("plan.yaml"), cl::cat(category));
cl::opt<unsigned> errorLimit("error-limit",
                             cl::desc("errors printed before the rest are only counted "
                                      "(0: no limit)"),
                             cl::init(DiagnosticEngine::defaultErrorLimit), cl::cat(category));
cl::opt<unsigned> paretoK("pareto-k", cl::desc("Pareto points kept per stage context (0: all)"),
                          cl::init(0), cl::cat(category));
cl::opt<double> timeLimit("time-limit", cl::desc("stop tuning after this many seconds"),
                          cl::init(0), cl::cat(category));
cl::opt<std::string> dumpMilp("dump-milp",
                              cl::desc("write every MILP as an LP file in this folder"),
                              cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> quiet("quiet", cl::desc("no progress lines while tuning"), cl::cat(category));
cl::opt<bool> nonUniformMeshes("nonuniform-meshes",
                               cl::desc("let stages differ in GPU count (full space; slower)"),
                               cl::cat(category));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("let the tuner use Megatron-LM's sequence parallelism (on by itself for "
             "--emit=megatron|torchtitan; the trainer runs it)"),
    cl::cat(category));
cl::opt<bool> selectiveRecompute(
    "selective-recompute",
    cl::desc("let the tuner use selective recomputation (the layers not checkpointed compute their "
             "norms and activation functions again before the backward; the trainer runs it)"),
    cl::cat(category));
cl::opt<bool> tpCommOverlap(
    "tp-comm-overlap",
    cl::desc("let the tuner overlap tp collectives with GEMMs (Megatron-LM's --tp-comm-overlap, "
             "with sequence parallelism; on by itself for --emit=megatron; priced and exported, "
             "not run by the trainer)"),
    cl::cat(category));
cl::opt<bool> interleave(
    "interleave",
    cl::desc("let the tuner use interleaved 1F1B (virtual stages; on by itself for "
             "--emit=megatron|torchtitan; the trainer runs them, the timeline does not draw them)"),
    cl::cat(category));
cl::opt<int64_t> globalBatch("global-batch", cl::desc("override train.global_batch"), cl::init(0),
                             cl::cat(category));

std::unique_ptr<Module> loadMist(unsigned buffer, Emit what, DiagnosticEngine &diag,
                                 llvm::raw_ostream &out, bool &astOnly) {
  if (seqLen < 0 || globalBatch < 0 || seqLen > limits::maxCount ||
      globalBatch > limits::maxCount) {
    diag.error({}, "--seq-len and --global-batch must lie in [0, " + groupDigits(limits::maxCount) +
                       "]");
    return nullptr;
  }
  FrontendOptions fo;
  fo.load.importDirs.assign(importDirs.begin(), importDirs.end());
  if (!stdlibDir.empty())
    fo.load.importDirs.push_back(stdlibDir);
  fo.gen.modelName = modelName;
  fo.gen.seqLen = seqLen;
  fo.gen.globalBatch = globalBatch;
  if (what != Emit::AST)
    return compileMist(buffer, fo, diag);
  if (auto program = loadProgram(buffer, fo.load, diag)) {
    dumpAST(*program->files.front(), out);
    astOnly = true;
  }
  return nullptr;
}

/// What to write: --emit, or what the output's extension says.
std::optional<Emit> chooseEmit(DiagnosticEngine &diag) {
  if (emit.getNumOccurrences())
    return emit.getValue();
  if (auto e = emitForOutput(outputPath))
    return e;
  diag.error({}, "cannot tell what to write to '" + outputPath + "' from its extension: use " +
                     outputExtensions() + ", or pass --emit");
  return std::nullopt;
}

/// The module from the input file, after the pass pipeline; nullptr after
/// errors, or when --emit=ast has written the syntax tree (`done`).
std::unique_ptr<Module> compileInput(unsigned id, Emit what, DiagnosticEngine &diag,
                                     llvm::raw_ostream &out, bool &done) {
  bool fromIR = inputKind.getNumOccurrences() ? inputKind == InputKind::IR
                                              : llvm::StringRef(inputPath).endswith(".mir");
  std::unique_ptr<Module> m;
  if (fromIR) {
    if (what == Emit::AST) {
      diag.error({}, "--emit=ast needs a .mist input");
      return nullptr;
    }
    m = parseIR(id, diag);
    if (m && failed(verifyModule(*m, diag)))
      return nullptr;
  } else {
    m = loadMist(id, what, diag, out, done);
  }
  if (!m || diag.hasErrors())
    return nullptr;
  PassManagerOptions pmo;
  pmo.printAfter.insert(printAfter.begin(), printAfter.end());
  pmo.printAfterAll = printAfterAll;
  pmo.verifyEach = verifyEach;
  pmo.timePasses = timePasses;
  PassManager pm(pmo, llvm::errs());
  PipelineRequest request;
  if (passList.getNumOccurrences())
    request.passes = std::vector<std::string>(passList.begin(), passList.end());
  request.withCosts = what != Emit::IR;
  request.fromIR = fromIR;
  if (!buildPipeline(pm, *m, request, diag) || failed(pm.run(*m, diag)) ||
      failed(verifyModule(*m, diag)))
    return nullptr;
  return m;
}

/// Where the tuned plan goes besides the output: --plan-out, or for a
/// trainer written to a file, beside it (train.cu -> train.plan.yaml).
std::string planOutputPath(Emit what) {
  if (!planOut.empty() || what != Emit::Trainer || !planPath.empty() || outputPath == "-")
    return planOut;
  llvm::SmallString<256> p(outputPath.getValue());
  llvm::sys::path::replace_extension(p, ".plan.yaml");
  return std::string(p);
}

/// The plan actions' options from the command line; nullopt after errors.
std::optional<PlanActionOptions> planActionOptions(Emit what, DiagnosticEngine &diag,
                                                   const InstallLayout &layout) {
  auto level = parseSpaceLevel(space);
  if (!level) {
    diag.error({}, "unknown --space '" + space +
                       "' (expected megatron, +zero, +ckpt, +offload, full or deepspeed)");
    return std::nullopt;
  }
  if (nodes < 0 || !(timeLimit >= 0) || !std::isfinite(timeLimit)) {
    diag.error({}, "--nodes must not be negative and --time-limit must be a number of seconds "
                   "(0: no limit)");
    return std::nullopt;
  }
  // The tuner writes an LP file per MILP there: say now, not never, that it cannot.
  if (!dumpMilp.empty() && !llvm::sys::fs::is_directory(dumpMilp.getValue())) {
    diag.error({}, "--dump-milp: '" + dumpMilp + "' is not a folder");
    return std::nullopt;
  }
  if (!planOut.empty() && !planPath.empty()) {
    diag.error({}, "--plan-out writes the plan mistc tunes; with --plan it tunes none");
    return std::nullopt;
  }
  PlanActionOptions pa;
  pa.cluster = clusterName;
  pa.nodes = nodes;
  pa.presetDirs = {layout.clusterDir};
  pa.planPath = planPath;
  pa.planOut = planOutputPath(what);
  pa.tuner.space.level = *level;
  pa.tuner.space.nonUniformMeshes = nonUniformMeshes;
  // The tp knobs a plan may use are those of the framework that runs it.
  const bool forTrainer = what == Emit::Trainer || what == Emit::Lowered;
  const bool drawn = what == Emit::Timeline || what == Emit::TimelineSvg;
  if ((tpCommOverlap && forTrainer) || (interleave && drawn)) {
    diag.error({}, fmt::format("--{} makes plans {}: use it with --emit=plan, report, "
                               "schedule, megatron or torchtitan{}",
                               tpCommOverlap && forTrainer ? "tp-comm-overlap" : "interleave",
                               tpCommOverlap && forTrainer
                                   ? "mistc's trainer does not run"
                                   : "the timeline does not draw (it replays plain 1F1B)",
                               tpCommOverlap && forTrainer ? "" : ", trainer"));
    return std::nullopt;
  }
  pa.tuner.space.interleaving = interleave || what == Emit::Megatron || what == Emit::TorchTitan;
  pa.tuner.space.sequenceParallel =
      sequenceParallel || tpCommOverlap || what == Emit::Megatron || what == Emit::TorchTitan;
  pa.tuner.space.tpCommOverlap = tpCommOverlap || what == Emit::Megatron;
  pa.tuner.space.selectiveRecompute = selectiveRecompute;
  pa.tuner.paretoLimit = paretoK;
  pa.tuner.timeLimitSeconds = timeLimit;
  pa.tuner.dumpMilpDir = dumpMilp;
  pa.tuner.progress = !quiet;
  pa.output = what;
  pa.forceExport = force;
  pa.projectedPlanOut = projectedPlan;
  pa.summaryToStdout = outputPath != "-";
  pa.trainer.modelFile = inputPath;
  pa.trainer.outputFile = outputPath;
  return pa;
}

/// --emit=hf: a folder, not a file, so not through the output file.
int writeHuggingFace(unsigned id, DiagnosticEngine &diag) {
  if (checkpointPath.empty() || outputPath == "-") {
    diag.error({}, "--emit=hf needs --checkpoint (a trainer checkpoint folder, --ckpt-dir's DIR) "
                   "and -o (the folder to write)");
    return 1;
  }
  bool done = false;
  std::unique_ptr<Module> m = compileInput(id, Emit::HuggingFace, diag, llvm::nulls(), done);
  return m && exportHuggingFace(*m, checkpointPath, outputPath, diag) ? 0 : 1;
}

/// --emit=checkpoint: a folder too.
int writeInitialCheckpoint(unsigned id, DiagnosticEngine &diag) {
  if (fromHfPath.empty() || outputPath == "-") {
    diag.error({}, "--emit=checkpoint needs --from-hf (a Hugging Face model folder) and -o (the "
                   "checkpoint folder to write)");
    return 1;
  }
  bool done = false;
  std::unique_ptr<Module> m = compileInput(id, Emit::Checkpoint, diag, llvm::nulls(), done);
  return m && importHuggingFace(*m, fromHfPath, outputPath, diag) ? 0 : 1;
}

int run(const InstallLayout &layout) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::errs());
  diag.setErrorLimit(errorLimit);
  // A misspelled pass name would otherwise print nothing, silently.
  for (const std::string &p : printAfter)
    if (!p.empty() && !lookupPass(p)) {
      diag.error({}, "unknown pass '" + p + "' in --print-ir-after (see --list-passes)");
      return 1;
    }
  std::optional<Emit> what = chooseEmit(diag);
  if (!what)
    return 1;
  std::string readError;
  std::unique_ptr<llvm::MemoryBuffer> buf =
      readInputFile(inputPath, sourceInput, readError, /*allowStdin=*/true);
  if (!buf) {
    diag.error({}, readError);
    return 1;
  }
  unsigned id = srcMgr.AddNewSourceBuffer(std::move(buf), llvm::SMLoc());
  if (*what == Emit::HuggingFace)
    return writeHuggingFace(id, diag);
  if (*what == Emit::Checkpoint)
    return writeInitialCheckpoint(id, diag);
  OutputFile out(outputPath, "output", diag);
  if (out.failed())
    return 1;
  bool done = false;
  std::unique_ptr<Module> m = compileInput(id, *what, diag, out.os(), done);
  if (done && !diag.hasErrors())
    return out.commit() ? 0 : 1;
  if (!m)
    return 1;
  if (actsOnPlan(*what)) {
    auto pa = planActionOptions(*what, diag, layout);
    if (!pa)
      return 1;
    int rc = runPlanActions(*m, *pa, diag, out.os());
    if (rc == 0 && !out.commit())
      return 1;
    return rc;
  }
  if (*what == Emit::Summary) {
    if (!m->state.costed) {
      diag.error({}, "--emit=summary needs the cost-model pass: add it to --passes (after "
                     "backward), or print the IR with --emit=ir");
      return 1;
    }
    printSummary(*m, out.os());
  } else {
    printModule(*m, out.os());
  }
  return out.commit() ? 0 : 1;
}

/// What a command that printed to standard output returns: `rc`, or 1
/// after reporting a failed write (a full disk, a closed pipe).
int checkedStdout(int rc) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::errs());
  return checkStandardOutput(diag) ? rc : 1;
}

/// mistc's version and commit first, then the libraries it was built with.
void printVersion(llvm::raw_ostream &os) {
  os << "mistc " << MIST_VERSION << " (commit " << MIST_COMMIT << ")\n"
     << "  built with LLVM " << LLVM_VERSION_STRING << ", GiNaC " << GINACLIB_MAJOR_VERSION << "."
     << GINACLIB_MINOR_VERSION << "." << GINACLIB_MICRO_VERSION << ", GLPK " << glp_version()
     << "\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter(printVersion);
  if (argc == 1) {
    llvm::errs() << "usage: mistc MODEL.mist [-o train.cu|plan.yaml|...] [--cluster NAME|FILE] "
                    "[--emit=WHAT]\n(mistc --help lists every option)\n";
    return 2;
  }
  const InstallLayout layout =
      InstallLayout::locate(llvm::sys::fs::getMainExecutable(argv[0], (void *)&main));
  // --list-passes, --print-build-flags and --print-vocabulary work without an input file.
  for (int i = 1; i < argc; ++i) {
    if (llvm::StringRef(argv[i]) == "--print-build-flags") {
      llvm::outs() << layout.cpuTrainerBuildFlags << "\n";
      return checkedStdout(0);
    }
    if (llvm::StringRef(argv[i]) == "--print-vocabulary") {
      printVocabulary(languageVocabulary(), llvm::outs());
      return checkedStdout(0);
    }
  }
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--list-passes") {
      for (const PassInfo &p : registeredPasses())
        llvm::outs() << "  " << p.argument << "  " << p.description
                     << (p.inDefaultPipeline ? "" : " [not in the default pipeline]") << "\n";
      return checkedStdout(0);
    }
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "mistc: compile transformer models to training plans\n"))
    return 1;
  if (!stdlibDir.getNumOccurrences())
    stdlibDir = layout.stdlibDir;
  return checkedStdout(run(layout));
}
