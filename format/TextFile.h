//===- TextFile.h - Reading a whole input file for a parser ---------------===//
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mist {

/// The most a text input of the format layer's readers may hold (cluster
/// and shapes files, as mistc's own limit: README, "Limits").
constexpr std::uintmax_t maxTextFileBytes = std::uintmax_t(64) << 20;

/// Reads `path` whole and hands its text to `parse(text, error)`; an
/// unreadable file, one that is not a regular file (a device, a FIFO:
/// refused before it is opened, so nothing blocks or reads without end),
/// one over maxTextFileBytes, or parse's error prefixed with the path, goes
/// to `error`.
template <typename Parse>
bool parseTextFile(const std::string &path, std::string &error, Parse parse) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    error = "cannot read '" + path + "'" + (ec ? ": " + ec.message() : "");
    return false;
  }
  if (!std::filesystem::is_regular_file(status)) {
    error = "cannot read '" + path + "': not a regular file";
    return false;
  }
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > maxTextFileBytes) {
    error = "cannot read '" + path + "': it is " + std::to_string(size) +
            " bytes, more than the 64 MiB this reads";
    return false;
  }
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
