//===- IRRoundTripTest.cpp - Textual IR in and out, verifier --------------===//
#include "TestUtil.h"
#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

using namespace mist;
using namespace mist::test;

namespace {

std::string print(const Module &m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printModule(m, os);
  return os.str();
}

struct Parsed {
  llvm::SourceMgr srcMgr;
  std::string diagText;
  llvm::raw_string_ostream diagStream{diagText};
  DiagnosticEngine diag{srcMgr, diagStream};
  std::unique_ptr<Module> module;
};

std::unique_ptr<Parsed> parse(const std::string &text) {
  auto p = std::make_unique<Parsed>();
  unsigned id = p->srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "test.mir"),
                                             llvm::SMLoc());
  p->module = parseIR(id, p->diag);
  return p;
}

TEST(IRRoundTrip, TinyModelsPrintParsePrintIdentically) {
  for (const char *file : {"tiny-gpt.mist", "tiny-llama.mist"}) {
    auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/" + file);
    ASSERT_TRUE(c->module) << c->diagText;
    std::string first = print(*c->module);
    auto p = parse(first);
    ASSERT_TRUE(p->module) << p->diagText;
    EXPECT_TRUE(succeeded(verifyModule(*p->module, p->diag))) << p->diagText;
    EXPECT_EQ(print(*p->module), first) << file;
  }
}

TEST(IRRoundTrip, VerifierRejectsAPartialSumFedToACompute) {
  auto c =
      compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist", {"shape-infer", "tp-shard"});
  ASSERT_TRUE(c->module) << c->diagText;
  std::string text = print(*c->module);
  // Make the residual add read the row-parallel partial sum directly.
  size_t at = text.find("add %x.1, %dropout");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("add %x.1, %dropout").size(), "add %x.1, %out.partial");
  auto p = parse(text);
  ASSERT_TRUE(p->module) << p->diagText;
  EXPECT_TRUE(failed(verifyModule(*p->module, p->diag)));
  EXPECT_NE(p->diagText.find("partial sum '%out.partial' feeds add"), std::string::npos)
      << p->diagText;
}

} // namespace
