//===- SafetensorsTool.cpp - Write, dump and copy safetensors files -------===//
/// \file
/// mist-safetensors-tool, for the cross-check against the reference Python
/// package (check_with_safetensors.py) and for looking into checkpoints:
///
///   mist-safetensors-tool write-example OUT   a fixed file of every dtype kind
///   mist-safetensors-tool dump FILE           one line per metadata entry and tensor
///   mist-safetensors-tool copy IN OUT         read with our reader, write with our writer
///
/// dump prints tab-separated lines: `metadata <key> <value>` and
/// `tensor <name> <dtype> <shape> <hex bytes>`, keys, values and names as
/// JSON strings and the shape as a JSON array, so any name survives.
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Json.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstdio>
#include <cstring>
#include <string>

using namespace mist::rt;

namespace {

template <typename T> std::vector<std::byte> bytesOf(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

/// Keep in step with EXAMPLE in check_with_safetensors.py.
int writeExample(const std::string &path) {
  const float matrix[] = {0.5f, -1.25f, 2.f, 3.75f, -0.f, 1e-3f};
  const float scalar[] = {42.f};
  std::vector<TensorData> tensors = {
      TensorData::fromFloats("w.matrix", {2, 3}, matrix),
      TensorData::fromFloats("w.scalar", {}, scalar),
      {"h.bf16", "BF16", {2}, bytesOf<uint16_t>({0x3F80, 0xC040})},       // 1, -3
      {"h.f16", "F16", {3}, bytesOf<uint16_t>({0x3C00, 0xC000, 0x3800})}, // 1, -2, 0.5
      {"i.ids", "I32", {4}, bytesOf<int32_t>({-1, 0, 7, 2147483647})},
      {"u.tokens", "U16", {2, 2}, bytesOf<uint16_t>({0, 1, 65535, 256})},
      {"z.empty", "F32", {0, 3}, {}},
  };
  std::map<std::string, std::string> metadata = {{"format", "mist-example"},
                                                 {"note", "quote \" tab \t \xC3\xA9 \xE2\x9C\x93"},
                                                 {"step", "12"}};
  if (auto error = writeSafetensors(path, tensors, metadata)) {
    std::fprintf(stderr, "error: %s\n", error->c_str());
    return 1;
  }
  return 0;
}

int dump(const std::string &path) {
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(path, error);
  if (!file) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  for (const auto &[key, value] : file->metadata)
    std::printf("metadata\t%s\t%s\n", quoteJson(key).c_str(), quoteJson(value).c_str());
  for (const TensorData &t : file->tensors) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? "," : "") + std::to_string(t.shape[i]);
    shape += "]";
    std::string hex;
    for (std::byte b : t.bytes) {
      char two[3];
      std::snprintf(two, sizeof two, "%02x", unsigned(b));
      hex += two;
    }
    std::printf("tensor\t%s\t%s\t%s\t%s\n", quoteJson(t.name).c_str(), t.dtype.c_str(),
                shape.c_str(), hex.c_str());
  }
  return 0;
}

int copy(const std::string &in, const std::string &out) {
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(in, error);
  if (!file) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  if (auto failed = writeSafetensors(out, file->tensors, file->metadata)) {
    std::fprintf(stderr, "error: %s\n", failed->c_str());
    return 1;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "write-example" && argc == 3)
    return writeExample(argv[2]);
  if (command == "dump" && argc == 3)
    return dump(argv[2]);
  if (command == "copy" && argc == 4)
    return copy(argv[2], argv[3]);
  std::fprintf(stderr, "usage: %s write-example OUT | dump FILE | copy IN OUT\n", argv[0]);
  return 2;
}
