//===- Sema.cpp - Loading, name resolution and call checking --------------===//
#include "frontend/Sema.h"

#include "frontend/Builtins.h"
#include "frontend/Parser.h"
#include "support/InputFile.h"
#include "support/Suggest.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <map>
#include <set>

using namespace mist;

namespace {

constexpr unsigned maxImportDepth = 32;

class Loader {
public:
  Loader(const LoadOptions &opts, DiagnosticEngine &diag, Program &program)
      : opts(opts), diag(diag), program(program) {}

  /// Records the main file, so an import cycle that leads back to it is
  /// harmless like any other repeated import (it is not parsed twice).
  void markLoaded(unsigned buffer) {
    llvm::StringRef path = diag.sourceMgr().getMemoryBuffer(buffer)->getBufferIdentifier();
    llvm::SmallString<256> real;
    if (llvm::sys::fs::is_regular_file(path) && !llvm::sys::fs::real_path(path, real))
      loaded.insert(std::string(real));
  }

  bool load(unsigned buffer, unsigned depth) {
    Parser parser(buffer, diag);
    auto file = parser.parseFile();
    if (!file)
      return false;
    FileAST *f = file.get();
    program.files.push_back(std::move(file));
    for (const ImportDecl &imp : f->imports)
      if (!import(imp, buffer, depth))
        return false;
    return true;
  }

private:
  bool import(const ImportDecl &imp, unsigned fromBuffer, unsigned depth) {
    if (!opts.allowImports) {
      diag.error(imp.range.Start, "imports are disabled in this mode", imp.range);
      return false;
    }
    if (depth >= maxImportDepth) {
      diag.error(imp.range.Start,
                 "imports nest more than " + std::to_string(maxImportDepth) + " deep", imp.range);
      return false;
    }
    std::string name = imp.path;
    if (!llvm::StringRef(name).endswith(".mist"))
      name += ".mist";
    llvm::SmallString<256> from(
        diag.sourceMgr().getMemoryBuffer(fromBuffer)->getBufferIdentifier());
    llvm::sys::path::remove_filename(from);
    std::vector<std::string> candidates;
    if (llvm::sys::path::is_absolute(name)) {
      candidates.push_back(name);
    } else {
      llvm::SmallString<256> local(from);
      llvm::sys::path::append(local, name);
      candidates.push_back(std::string(local));
      for (const std::string &dir : opts.importDirs) {
        llvm::SmallString<256> p(dir);
        llvm::sys::path::append(p, name);
        candidates.push_back(std::string(p));
      }
    }
    // A file never imports itself: llama.mist saying `import "llama"` means
    // the library's llama, not the file (a copy of an example under the
    // module's name would otherwise find itself first).
    llvm::SmallString<256> self;
    const llvm::StringRef fromPath =
        diag.sourceMgr().getMemoryBuffer(fromBuffer)->getBufferIdentifier();
    if (llvm::sys::fs::real_path(fromPath, self))
      self = fromPath;
    for (const std::string &path : candidates) {
      if (!llvm::sys::fs::is_regular_file(path))
        continue;
      llvm::SmallString<256> real;
      if (llvm::sys::fs::real_path(path, real))
        real = path;
      if (real == self)
        continue;
      if (!loaded.insert(std::string(real)).second)
        return true; // imported already: imports are idempotent
      std::string error;
      std::unique_ptr<llvm::MemoryBuffer> buf = readInputFile(path, sourceInput, error);
      if (!buf) {
        diag.error(imp.range.Start, error, imp.range);
        return false;
      }
      unsigned id = diag.sourceMgr().AddNewSourceBuffer(std::move(buf), imp.range.Start);
      return load(id, depth + 1);
    }
    diag.error(imp.range.Start,
               "cannot find module '" + imp.path + "' (looked for " + name +
                   " next to this file and in the import path)",
               imp.range);
    return false;
  }

  const LoadOptions &opts;
  DiagnosticEngine &diag;
  Program &program;
  std::set<std::string> loaded;
};

/// Walks statements checking names and calls.
/// The names of a parameter list, for "did you mean".
template <typename Params> std::vector<std::string> namesOf(const Params &params) {
  std::vector<std::string> out;
  for (const auto &p : params)
    out.push_back(p.name);
  return out;
}

template <typename Map> std::vector<std::string> keysOf(const Map &map) {
  std::vector<std::string> out;
  for (const auto &[name, _] : map)
    out.push_back(name);
  return out;
}

class Checker {
public:
  Checker(Program &p, const LoadOptions &opts, DiagnosticEngine &diag)
      : program(p), opts(opts), diag(diag) {}

  bool ok = true;

  void checkBlock(const BlockDecl &b) {
    std::set<std::string> scope = paramScope(b.params);
    checkStmts(b.body, scope, "block '" + b.name + "'");
    if (b.body.empty() || !b.body.back().isReturn)
      fail(b.nameRange.Start, "block '" + b.name + "' must end with a return statement");
  }

  void checkModel(const ModelDecl &m) {
    std::set<std::string> scope = paramScope(m.params);
    for (const InputAST &in : m.inputs) {
      for (auto &d : in.dims)
        checkExpr(*d, scope);
      if (!scope.insert(in.name).second)
        fail(in.range.Start, "input '" + in.name + "' redeclares a name");
    }
    if (!m.hasRepeat)
      fail(m.nameRange.Start, "model '" + m.name + "' has no 'repeat' section");
    if (!m.hasPost)
      fail(m.nameRange.Start, "model '" + m.name + "' has no 'post' section");
    if (m.hasRepeat)
      checkExpr(*m.repeatCount, scope);
    checkStmts(m.pre, scope, "the pre section");
    checkStmts(m.body, scope, "the repeat section");
    checkStmts(m.post, scope, "the post section");
    if (m.hasPost && (m.post.empty() || !m.post.back().isReturn))
      fail(m.postLoc, "the post section must end with 'return <loss>'");
  }

  void checkInstance(const InstanceDecl &inst) {
    auto it = program.models.find(inst.call->callee);
    if (it == program.models.end()) {
      fail(inst.call->calleeRange.Start,
           "unknown model template '" + inst.call->callee + "'" +
               didYouMean(inst.call->callee, keysOf(program.models)),
           inst.call->calleeRange);
      importHint(inst.call->callee, inst.call->calleeRange.Start);
      return;
    }
    const ModelDecl &m = *it->second;
    std::set<std::string> given, guessed; // guessed: what a misspelled name meant
    auto misspelling = [&](const std::string &name) {
      std::string hint = didYouMean(name, namesOf(m.params));
      if (auto best = closestName(name, namesOf(m.params)))
        guessed.insert(*best);
      return hint;
    };
    size_t position = 0;
    for (const CallArg &a : inst.call->args) {
      if (a.name.empty()) {
        // The parameter at its position is what it most likely gives.
        std::string hint;
        if (position < m.params.size()) {
          hint = "; did you mean '" + m.params[position].name + " = ...'?";
          guessed.insert(m.params[position].name);
        }
        ++position;
        fail(a.value->loc(), "model arguments must be named (name = value)" + hint);
        continue;
      }
      ++position;
      bool known = false;
      for (const ParamAST &p : m.params)
        known |= p.name == a.name;
      if (!known)
        fail(a.nameRange.Start,
             "model '" + m.name + "' has no parameter '" + a.name + "'" + misspelling(a.name),
             a.nameRange);
      else if (!given.insert(a.name).second)
        fail(a.nameRange.Start, "parameter '" + a.name + "' is given twice", a.nameRange);
      std::set<std::string> empty;
      checkExpr(*a.value, empty);
    }
    // A parameter the misspelling meant is not missing too: one error, not two.
    for (const ParamAST &p : m.params)
      if (!p.defaultValue && !given.count(p.name) && !guessed.count(p.name))
        fail(inst.call->range.Start,
             "missing value for parameter '" + p.name + "' of model '" + m.name + "'",
             inst.call->range);
  }

private:
  /// A template named like a file of the import path is most likely defined
  /// there: say which import brings it.
  void importHint(const std::string &name, llvm::SMLoc loc) {
    for (const std::string &dir : opts.importDirs) {
      llvm::SmallString<256> path(dir);
      llvm::sys::path::append(path, name + ".mist");
      if (llvm::sys::fs::exists(path)) {
        diag.note(loc, "'" + name + "' is defined in " + std::string(path) + ": add `import \"" +
                           name + "\"` at the top of the file");
        return;
      }
    }
  }

  void fail(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> r = {}) {
    diag.error(loc, msg, r);
    ok = false;
  }

  std::set<std::string> paramScope(const std::vector<ParamAST> &params) {
    std::set<std::string> scope = {"b", "s"};
    for (const ParamAST &p : params) {
      if (p.name == "b" || p.name == "s") {
        fail(p.range.Start,
             "'" + p.name + "' is a built-in dimension (" +
                 (p.name == "b" ? "micro-batch" : "sequence length") +
                 ") and cannot be a parameter",
             p.range);
        continue;
      }
      if (p.defaultValue)
        checkExpr(*p.defaultValue, scope);
      if (!scope.insert(p.name).second)
        fail(p.range.Start, "parameter '" + p.name + "' is declared twice", p.range);
    }
    return scope;
  }

  void checkStmts(const StmtList &stmts, std::set<std::string> &scope, const std::string &where) {
    for (size_t i = 0; i < stmts.size(); ++i) {
      const StmtAST &s = stmts[i];
      checkExpr(*s.value, scope);
      if (s.isReturn && i + 1 != stmts.size())
        fail(s.loc, "return must be the last statement of " + where);
      if (!s.isReturn) {
        if (s.target == "b" || s.target == "s")
          fail(s.loc, "cannot assign to the built-in dimension '" + s.target + "'", s.targetRange);
        scope.insert(s.target);
      }
    }
  }

  void checkExpr(const ExprAST &e, const std::set<std::string> &scope) {
    if (auto *id = llvm::dyn_cast<IdentExpr>(&e)) {
      if (!scope.count(id->name))
        fail(id->loc(),
             "use of undefined name '" + id->name + "'" +
                 didYouMean(id->name, std::vector<std::string>(scope.begin(), scope.end())),
             id->range);
    } else if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
      checkExpr(*u->operand, scope);
    } else if (auto *b = llvm::dyn_cast<BinaryExpr>(&e)) {
      checkExpr(*b->lhs, scope);
      checkExpr(*b->rhs, scope);
    } else if (auto *t = llvm::dyn_cast<TupleExpr>(&e)) {
      for (auto &el : t->elements)
        checkExpr(*el, scope);
    } else if (auto *c = llvm::dyn_cast<CallExpr>(&e)) {
      checkCall(*c, scope);
    }
  }

  void checkCall(const CallExpr &c, const std::set<std::string> &scope) {
    if (const Builtin *b = lookupBuiltin(c.callee)) {
      checkBuiltinCall(c, *b, scope);
      return;
    }
    auto it = program.blocks.find(c.callee);
    if (it == program.blocks.end()) {
      std::vector<std::string> known = keysOf(program.blocks);
      for (const Builtin &b : allBuiltins())
        known.push_back(b.name);
      fail(c.calleeRange.Start,
           "unknown block or operation '" + c.callee + "'" + didYouMean(c.callee, known),
           c.calleeRange);
      return;
    }
    const BlockDecl &blk = *it->second;
    std::vector<bool> given(blk.params.size(), false);
    size_t positional = 0;
    for (const CallArg &a : c.args) {
      checkExpr(*a.value, scope);
      size_t idx = blk.params.size();
      if (a.name.empty()) {
        idx = positional++;
        if (idx >= blk.params.size()) {
          fail(a.value->loc(), "too many arguments to block '" + blk.name + "' (it takes " +
                                   std::to_string(blk.params.size()) + ")");
          continue;
        }
      } else {
        for (size_t i = 0; i < blk.params.size(); ++i)
          if (blk.params[i].name == a.name)
            idx = i;
        if (idx == blk.params.size()) {
          fail(a.nameRange.Start,
               "block '" + blk.name + "' has no parameter '" + a.name + "'" +
                   didYouMean(a.name, namesOf(blk.params)),
               a.nameRange);
          continue;
        }
      }
      if (given[idx])
        fail(a.name.empty() ? a.value->loc() : a.nameRange.Start,
             "parameter '" + blk.params[idx].name + "' of block '" + blk.name + "' is given twice",
             a.name.empty() ? a.value->range : a.nameRange);
      given[idx] = true;
    }
    for (size_t i = 0; i < blk.params.size(); ++i)
      if (!given[i] && !blk.params[i].defaultValue)
        fail(c.range.Start,
             "missing argument '" + blk.params[i].name + "' in call to block '" + blk.name + "'",
             c.calleeRange);
  }

  void checkBuiltinCall(const CallExpr &c, const Builtin &b, const std::set<std::string> &scope) {
    std::vector<bool> given(b.params.size(), false);
    size_t positional = 0;
    for (const CallArg &a : c.args) {
      int idx;
      if (a.name.empty()) {
        if (positional >= b.maxPositional) {
          fail(a.value->loc(), std::string(b.name) + " takes at most " +
                                   std::to_string(b.maxPositional) +
                                   " positional arguments; pass the rest by name");
          continue;
        }
        idx = static_cast<int>(positional++);
      } else {
        idx = b.paramIndex(a.name);
        if (idx < 0) {
          std::vector<std::string> known;
          for (const BuiltinParam &p : b.params)
            known.push_back(p.name);
          fail(a.nameRange.Start,
               std::string(b.name) + " has no parameter '" + a.name + "'" +
                   didYouMean(a.name, known),
               a.nameRange);
          continue;
        }
      }
      const BuiltinParam &p = b.params[idx];
      if (given[idx])
        fail(a.name.empty() ? a.value->loc() : a.nameRange.Start,
             "parameter '" + std::string(p.name) + "' of " + b.name + " is given twice",
             a.name.empty() ? a.value->range : a.nameRange);
      given[idx] = true;
      if (p.kind == ArgKind::Word) {
        auto *id = llvm::dyn_cast<IdentExpr>(a.value.get());
        if (!id)
          fail(a.value->loc(), "'" + std::string(p.name) + "' expects one of: " + p.words,
               a.value->range);
        else if (!wordAllowed(p, id->name))
          fail(id->loc(),
               "'" + id->name + "' is not a valid value for '" + p.name +
                   "' (expected one of: " + p.words + ")",
               id->range);
        continue;
      }
      checkExpr(*a.value, scope);
    }
    for (size_t i = 0; i < b.params.size(); ++i)
      if (!given[i] && b.params[i].required)
        fail(c.range.Start, std::string(b.name) + " needs the argument '" + b.params[i].name + "'",
             c.calleeRange);
  }

  Program &program;
  const LoadOptions &opts;
  DiagnosticEngine &diag;
};

} // namespace

std::unique_ptr<Program> mist::loadProgram(unsigned mainBuffer, const LoadOptions &opts,
                                           DiagnosticEngine &diag) {
  auto program = std::make_unique<Program>();
  Loader loader(opts, diag, *program);
  loader.markLoaded(mainBuffer);
  if (!loader.load(mainBuffer, 0))
    return nullptr;
  return program;
}

LogicalResult mist::checkProgram(Program &program, const LoadOptions &opts,
                                 DiagnosticEngine &diag) {
  unsigned errorsBefore = diag.errorCount();
  std::map<std::string, llvm::SMRange> declared;
  auto declare = [&](const std::string &name, llvm::SMRange range, const char *what) {
    if (lookupBuiltin(name)) {
      diag.error(range.Start, std::string(what) + " '" + name + "' shadows a built-in operation",
                 range);
      return false;
    }
    auto [it, fresh] = declared.emplace(name, range);
    if (!fresh) {
      diag.error(range.Start, "redefinition of '" + name + "'", range);
      diag.note(it->second.Start, "previous definition is here");
    }
    return fresh;
  };
  // Imports were appended after their importer; declare in reverse so the
  // main file's names conflict with imported ones, not the other way round.
  for (auto it = program.files.rbegin(); it != program.files.rend(); ++it) {
    FileAST &f = **it;
    for (const BlockDecl &b : f.blocks)
      if (declare(b.name, b.nameRange, "block"))
        program.blocks[b.name] = &b;
    for (const ModelDecl &m : f.models)
      if (declare(m.name, m.nameRange, "model"))
        program.models[m.name] = &m;
    for (const InstanceDecl &i : f.instances)
      if (declare(i.name, i.nameRange, "model"))
        program.instances[i.name] = &i;
  }
  const FileAST &mainFile = *program.files.front();
  if (mainFile.trains.size() > 1) {
    diag.error(mainFile.trains[1].loc, "a file has at most one train section");
    diag.note(mainFile.trains[0].loc, "the first train section is here");
  }
  if (!mainFile.trains.empty()) {
    program.train = &mainFile.trains[0];
    // One value per key: a second one would silently win.
    std::map<std::string, const TrainEntry *> seen;
    for (const TrainEntry &e : program.train->entries)
      if (auto [first, fresh] = seen.emplace(e.key, &e); !fresh) {
        diag.error(e.keyRange.Start, "train key '" + e.key + "' is given twice", e.keyRange);
        diag.note(first->second->keyRange.Start, "first given here");
      }
  }

  Checker checker(program, opts, diag);
  for (auto &f : program.files) {
    for (const BlockDecl &b : f->blocks)
      checker.checkBlock(b);
    for (const ModelDecl &m : f->models)
      checker.checkModel(m);
    for (const InstanceDecl &i : f->instances)
      checker.checkInstance(i);
  }
  return diag.errorCount() == errorsBefore ? success() : failure();
}
