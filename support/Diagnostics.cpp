//===- Diagnostics.cpp - Located error reporting --------------------------===//
#include "support/Diagnostics.h"

#include "support/Printable.h"

#include <algorithm>
#include <vector>

using namespace mist;

namespace {

const char *kindLabel(llvm::SourceMgr::DiagKind kind) {
  return kind == llvm::SourceMgr::DK_Error     ? "error"
         : kind == llvm::SourceMgr::DK_Warning ? "warning"
                                               : "note";
}

/// Prints `d` as SourceMgr would, but with its source line cut to a window
/// of `width` columns around the caret ("..." marking each cut) and its
/// ranges clipped to it; the header keeps the real column.
void printWindowed(const llvm::SMDiagnostic &d, size_t width, llvm::raw_ostream &os) {
  llvm::StringRef line = d.getLineContents();
  const size_t col = d.getColumnNo() < 0 ? 0 : static_cast<size_t>(d.getColumnNo());
  const size_t begin = col > width / 2 ? col - width / 2 : 0;
  const size_t end = std::min(line.size(), begin + width);
  const std::string head = begin > 0 ? "..." : "", tail = end < line.size() ? "..." : "";
  os << d.getFilename() << ":" << d.getLineNo() << ":" << col + 1 << ": " << kindLabel(d.getKind())
     << ": " << d.getMessage() << "\n";
  os << head << line.substr(begin, end - begin) << tail << "\n";
  std::string marks(head.size() + (end - begin), ' ');
  for (auto [from, to] : d.getRanges())
    for (size_t c = std::max<size_t>(from, begin); c < std::min<size_t>(to, end); ++c)
      marks[head.size() + c - begin] = '~';
  const size_t caret = head.size() + col - begin;
  if (marks.size() <= caret)
    marks.resize(caret + 1, ' ');
  marks[caret] = '^';
  os << llvm::StringRef(marks).rtrim() << "\n";
}

/// Prints `d` with its source line escaped (support/Printable.h): control
/// and bidirectional characters shown as `\x1b` or `<U+202E>`, the caret
/// and ranges at the escaped columns, the line cut to `width` columns
/// around the caret when longer.
void printEscaped(const llvm::SMDiagnostic &d, size_t width, llvm::raw_ostream &os) {
  std::vector<size_t> at;
  const std::string line = printable(d.getLineContents(), &at);
  const size_t col = d.getColumnNo() < 0 ? 0 : static_cast<size_t>(d.getColumnNo());
  const size_t caretAt = at[std::min(col, at.size() - 1)];
  const size_t begin = line.size() > width && caretAt > width / 2 ? caretAt - width / 2 : 0;
  const size_t end = std::min(line.size(), begin + width);
  const std::string head = begin > 0 ? "..." : "", tail = end < line.size() ? "..." : "";
  os << printable(d.getFilename()) << ":" << d.getLineNo() << ":" << col + 1 << ": "
     << kindLabel(d.getKind()) << ": " << printable(d.getMessage()) << "\n";
  os << head << line.substr(begin, end - begin) << tail << "\n";
  std::string marks(head.size() + (end - begin), ' ');
  for (auto [from, to] : d.getRanges()) {
    const size_t a = at[std::min<size_t>(from, at.size() - 1)],
                 b = at[std::min<size_t>(to, at.size() - 1)];
    for (size_t c = std::max(a, begin); c < std::min(b, end); ++c)
      marks[head.size() + c - begin] = '~';
  }
  const size_t caret = head.size() + caretAt - begin;
  if (marks.size() <= caret)
    marks.resize(caret + 1, ' ');
  marks[caret] = '^';
  os << llvm::StringRef(marks).rtrim() << "\n";
}

} // namespace

void DiagnosticEngine::print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
                             const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges) {
  if (loc.isValid()) {
    llvm::SMDiagnostic d = srcMgr.GetMessage(loc, kind, msg, ranges);
    if (needsEscaping(d.getLineContents()) || needsEscaping(d.getMessage()) ||
        needsEscaping(d.getFilename()))
      printEscaped(d, maxEchoedColumns, *os);
    else if (d.getLineContents().size() > maxEchoedColumns)
      printWindowed(d, maxEchoedColumns, *os);
    else
      srcMgr.PrintMessage(*os, d);
    return;
  }
  // Errors without a source position (command line, internal limits).
  *os << "mistc: " << kindLabel(kind) << ": " << printable(msg.str()) << "\n";
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &msg,
                             llvm::ArrayRef<llvm::SMRange> ranges) {
  ++numErrors;
  const bool inTemplate =
      instance && loc.isValid() && instance->at.isValid() &&
      srcMgr.FindBufferContainingLoc(loc) != srcMgr.FindBufferContainingLoc(instance->at);
  if ((errorLimit == 0 || numErrors <= errorLimit) && inTemplate) {
    print(instance->at, llvm::SourceMgr::DK_Error, "in model '" + instance->name + "': " + msg,
          instance->range);
    print(loc, llvm::SourceMgr::DK_Note, "the template checks it here", ranges);
  } else if (errorLimit == 0 || numErrors <= errorLimit)
    print(loc, llvm::SourceMgr::DK_Error, msg, ranges);
  else if (numErrors == errorLimit + 1)
    *os << "mistc: error: too many errors; the rest are not shown (--error-limit=0 shows all)\n";
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &msg) {
  print(loc, llvm::SourceMgr::DK_Warning, msg, {});
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &msg,
                            llvm::ArrayRef<llvm::SMRange> ranges) {
  if (errorLimit != 0 && numErrors > errorLimit)
    return; // the error it explains was not shown
  print(loc, llvm::SourceMgr::DK_Note, msg, ranges);
}
