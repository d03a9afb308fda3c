//===- Printable.h - User text made safe to print in a terminal -----------===//
/// \file
/// Diagnostics echo what users wrote (a source line, a key, a file name). A
/// control character there could move the cursor, clear the screen or end
/// the line early, and Unicode's bidirectional controls (U+202A-U+202E,
/// U+2066-U+2069, ...) make a line display in another order than it reads
/// (the "Trojan Source" trick); invalid UTF-8 garbles the terminal. These
/// are printed escaped instead: `\x1b`, `<U+202E>`.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mist {

/// Whether `text` holds anything printable() would change.
bool needsEscaping(llvm::StringRef text);

/// `text` with controls (but tab), bidirectional controls and invalid UTF-8
/// escaped. With `columns`, columns[i] is where byte i of `text` starts in
/// the result, for carets (one entry per byte, plus one for the end).
std::string printable(llvm::StringRef text, std::vector<size_t> *columns = nullptr);

} // namespace mist
