//===- ShapesFile.cpp - The ops and shapes a profiler run measures --------===//
#include "tools/profiler/ShapesFile.h"

#include "format/TextFile.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace mist::profiler {

double ShapeEntry::number(const std::string &key, double dflt) const {
  auto it = attrs.find(key);
  if (it == attrs.end())
    return dflt;
  char *end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  return end && !*end && !it->second.empty() ? v : dflt;
}

std::string ShapeEntry::word(const std::string &key, const std::string &dflt) const {
  auto it = attrs.find(key);
  return it == attrs.end() ? dflt : it->second;
}

namespace {

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos)
      return parts;
    start = at + 1;
  }
}

/// Bounds that keep every size the op timers compute from a key (an
/// operand's elements times one dimension of another) within int64_t.
constexpr int64_t maxDim = int64_t(1) << 24, maxOperandElements = int64_t(1) << 38;

/// "8192x2048,2048x6144" -> {{8192, 2048}, {2048, 6144}}; an empty operand
/// is a scalar. False for anything but positive integers within the bounds.
bool parseKey(const std::string &key, std::vector<std::vector<int64_t>> &operands) {
  if (key.empty())
    return false;
  for (const std::string &op : split(key, ',')) {
    std::vector<int64_t> dims;
    int64_t elements = 1;
    if (!op.empty())
      for (const std::string &d : split(op, 'x')) {
        if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos)
          return false;
        errno = 0;
        long long v = std::strtoll(d.c_str(), nullptr, 10);
        if (errno || v <= 0 || v > maxDim || elements > maxOperandElements / v)
          return false;
        elements *= v;
        dims.push_back(v);
      }
    operands.push_back(std::move(dims));
  }
  return true;
}

} // namespace

bool parseShapes(const std::string &text, std::vector<ShapeEntry> &out, std::string &error,
                 std::string *dtype) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  std::set<std::pair<std::string, std::string>> seen;
  std::vector<ShapeEntry> entries;
  auto fail = [&](const std::string &what) {
    error = "line " + std::to_string(number) + ": " + what;
    return false;
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (number == 1) {
      if (line != "# mist-profile-shapes 1")
        return fail("expected '# mist-profile-shapes 1' (a file from mistc --emit=profile-shapes)");
      continue;
    }
    if (dtype && line.rfind("# dtype ", 0) == 0)
      *dtype = line.substr(8);
    if (line.empty() || line[0] == '#')
      continue;
    std::vector<std::string> fields = split(line, '\t');
    if (fields.size() < 2 || fields.size() > 3)
      return fail("expected 'op<TAB>shape<TAB>attributes'");
    ShapeEntry e;
    e.op = fields[0];
    e.shape = fields[1];
    e.line = number;
    if (e.op.empty())
      return fail("empty op name");
    if (!parseKey(e.shape, e.operands))
      return fail("bad shape key '" + e.shape +
                  "' (expected e.g. 8192x2048,2048x6144: positive dimensions up to 2^24, "
                  "operands up to 2^38 elements)");
    if (fields.size() == 3 && fields[2] != "-" && !fields[2].empty())
      for (const std::string &kv : split(fields[2], ',')) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
          return fail("bad attribute '" + kv + "' (expected key=value)");
        e.attrs[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    if (!seen.insert({e.op, e.shape}).second)
      return fail("a second line for " + e.op + " at " + e.shape);
    entries.push_back(std::move(e));
  }
  if (number == 0)
    return fail("empty file");
  out = std::move(entries);
  return true;
}

bool readShapesFile(const std::string &path, std::vector<ShapeEntry> &out, std::string &error,
                    std::string *dtype) {
  return parseTextFile(path, error, [&](const std::string &text, std::string &why) {
    return parseShapes(text, out, why, dtype);
  });
}

} // namespace mist::profiler
