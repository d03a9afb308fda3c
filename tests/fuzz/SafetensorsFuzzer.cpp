//===- SafetensorsFuzzer.cpp - libFuzzer target for the safetensors reader ===//
/// \file
/// Feeds arbitrary bytes, as a file, to mist::rt::readSafetensors
/// (runtime/checkpoint/Safetensors.h, how the trainer resumes from a
/// checkpoint) and traps when a file it accepts breaks an invariant:
///
///  - every tensor the reader returns is an entry of the header, and its
///    data_offsets [begin, end) lie inside the file's data: 8 + N + end <=
///    file size (N the header length);
///  - its bytes are exactly the file's bytes [8 + N + begin, 8 + N + end),
///    and their count is the shape's element count * the dtype's size;
///  - the tensors are sorted by name, one per header entry other than
///    "__metadata__", and together cover all the data bytes;
///  - writeSafetensors accepts what was read, and reading that file back
///    gives the same tensors and metadata.
///
/// The input reaches the reader through an in-memory file (MemFile.h); the
/// round trip writes into a private folder under /dev/shm (or $TMPDIR).
/// Built only with -DMIST_FUZZ=ON (docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Json.h"
#include "runtime/checkpoint/Safetensors.h"
#include "tests/fuzz/MemFile.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>

using namespace mist::rt;

namespace {

/// A JSON number as written by a non-negative integer, or nullopt.
std::optional<uint64_t> unsignedOf(const JsonValue &v) {
  if (v.kind != JsonValue::Kind::Number || v.text.empty())
    return std::nullopt;
  uint64_t n = 0;
  for (char c : v.text)
    if (c < '0' || c > '9' || __builtin_mul_overflow(n, uint64_t(10), &n) ||
        __builtin_add_overflow(n, uint64_t(c - '0'), &n))
      return std::nullopt;
  return n;
}

bool sameTensors(const SafetensorsFile &a, const SafetensorsFile &b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size())
    return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorData &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.bytes != y.bytes)
      return false;
  }
  return true;
}

void checkAccepted(const SafetensorsFile &file, const uint8_t *data, size_t size) {
  // The reader checked these; the fuzzer only relies on them to look further.
  if (size < 8)
    __builtin_trap();
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = headerBytes << 8 | data[i];
  if (headerBytes > size - 8)
    __builtin_trap(); // accepted a header longer than the file
  const uint64_t dataStart = 8 + headerBytes, dataBytes = size - dataStart;
  std::string error;
  std::optional<JsonValue> root = parseJson(
      std::string_view(reinterpret_cast<const char *>(data) + 8, size_t(headerBytes)), error);
  if (!root || root->kind != JsonValue::Kind::Object)
    __builtin_trap(); // accepted a header that is not a JSON object

  size_t entries = 0;
  uint64_t covered = 0;
  for (const auto &[name, entry] : root->members) {
    if (name == "__metadata__")
      continue;
    ++entries;
    const TensorData *t = file.find(name);
    if (!t || entry.kind != JsonValue::Kind::Object)
      __builtin_trap(); // a header entry the reader did not return
    const JsonValue *offsets = nullptr;
    for (const auto &[key, field] : entry.members)
      if (key == "data_offsets")
        offsets = &field;
    if (!offsets || offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2)
      __builtin_trap();
    const std::optional<uint64_t> begin = unsignedOf(offsets->items[0]);
    const std::optional<uint64_t> end = unsignedOf(offsets->items[1]);
    if (!begin || !end || *begin > *end || *end > dataBytes)
      __builtin_trap(); // a byte range outside the file's data
    if (t->bytes.size() != *end - *begin ||
        (!t->bytes.empty() &&
         std::memcmp(t->bytes.data(), data + dataStart + *begin, t->bytes.size()) != 0))
      __builtin_trap(); // the tensor's bytes are not the file's bytes at its offsets
    uint64_t elements = uint64_t(dtypeSize(t->dtype));
    if (elements == 0)
      __builtin_trap(); // an unknown dtype got through
    for (int64_t d : t->shape)
      if (d < 0 || __builtin_mul_overflow(elements, uint64_t(d), &elements))
        __builtin_trap();
    if (elements != t->bytes.size())
      __builtin_trap(); // shape * element size != byte count
    covered += t->bytes.size();
  }
  if (entries != file.tensors.size() || covered != dataBytes)
    __builtin_trap(); // tensors missing, duplicated, or data bytes left over
  for (size_t i = 1; i < file.tensors.size(); ++i)
    if (!(file.tensors[i - 1].name < file.tensors[i].name))
      __builtin_trap(); // not sorted by name, or a name twice

  // What was read can be written, and reads back the same.
  static const mist::fuzz::ScratchFile roundTrip("mist-safetensors-fuzzer",
                                                 "roundtrip.safetensors");
  const std::string &path = roundTrip.path();
  if (std::optional<std::string> failed = writeSafetensors(path, file.tensors, file.metadata))
    __builtin_trap(); // the writer refuses what the reader accepted
  std::optional<SafetensorsFile> reread = readSafetensors(path, error);
  static_cast<void>(::unlink(path.c_str())); // a crash below leaves only the empty folder
  if (!reread || !sameTensors(file, *reread))
    __builtin_trap(); // read -> write -> read changed the contents
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mist::fuzz::MemFile input("safetensors-fuzz-input");
  input.assign(data, size);
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(input.path(), error);
  if (!file) {
    if (error.empty())
      __builtin_trap(); // rejected without a reason
    return 0;
  }
  checkAccepted(*file, data, size);
  return 0;
}
