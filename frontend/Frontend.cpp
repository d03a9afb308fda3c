//===- Frontend.cpp - Source text to IR in one call -----------------------===//
#include "frontend/Frontend.h"

using namespace mist;

std::unique_ptr<Module> mist::compileMist(unsigned bufferId, const FrontendOptions &opts,
                                          DiagnosticEngine &diag) {
  auto program = loadProgram(bufferId, opts.load, diag);
  if (!program || failed(checkProgram(*program, opts.load, diag)))
    return nullptr;
  return generateIR(*program, opts.gen, diag);
}
