//===- TestUtil.h - Compile .mist text in unit tests ----------------------===//
#pragma once

#include "SourceDiagnostics.h"
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "llvm/Support/MemoryBuffer.h"
#include <gtest/gtest.h>

namespace mist::test {

/// Owns everything a compiled module refers to (source buffers, diagnostics).
struct Compiled : SourceDiagnostics {
  std::unique_ptr<Module> module;
};

/// Compiles `source` (imports resolve in the stdlib) and runs `passes`
/// (all registered passes when empty).
inline std::unique_ptr<Compiled> compile(const std::string &source,
                                         std::vector<std::string> passes = {},
                                         const std::string &name = "test.mist") {
  auto c = std::make_unique<Compiled>();
  unsigned id = c->addBuffer(source, name);
  FrontendOptions opts;
  opts.load.importDirs = {MIST_STDLIB_DIR};
  c->module = compileMist(id, opts, c->diag);
  if (c->module && !runPipeline(*c->module, passes, c->diag))
    c->module.reset();
  return c;
}

inline std::unique_ptr<Compiled> compileFile(const std::string &path,
                                             std::vector<std::string> passes = {}) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buf)) << "cannot read " << path;
  if (!buf)
    return std::make_unique<Compiled>();
  return compile((*buf)->getBuffer().str(), std::move(passes), path);
}

/// The symbol of a module by name, as an expression.
inline Expr sym(const Module &m, const char *name) {
  const Symbol *s = m.symbols.lookup(name);
  EXPECT_NE(s, nullptr) << "no symbol " << name;
  return s ? Expr(s->sym) : Expr(0);
}

} // namespace mist::test
