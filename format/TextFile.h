//===- TextFile.h - Reading a whole input file for a parser ---------------===//
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace mist {

/// Reads `path` whole and hands its text to `parse(text, error)`; an
/// unreadable file, or parse's error prefixed with the path, goes to `error`.
template <typename Parse>
bool parseTextFile(const std::string &path, std::string &error, Parse parse) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read '" + path + "'";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!parse(text.str(), error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

} // namespace mist
