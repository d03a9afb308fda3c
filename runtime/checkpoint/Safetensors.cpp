//===- Safetensors.cpp - Checkpoint tensors in the safetensors format -----===//
#include "runtime/checkpoint/Safetensors.h"

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Json.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <new>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this runtime copies it as is");

namespace mist::rt {

namespace {

/// The reference's Dtype enum order (safetensors/src/tensor.rs), which its
/// writer sorts by, widest last; sizes in bytes.
struct DtypeInfo {
  std::string_view name;
  int size;
};
constexpr DtypeInfo kDtypes[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},  {"I16", 2}, {"U16", 2},
                                 {"F16", 2},  {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},
                                 {"F64", 8},  {"I64", 8},  {"U64", 8}};

int dtypeRank(std::string_view dtype) {
  for (size_t i = 0; i < std::size(kDtypes); ++i)
    if (kDtypes[i].name == dtype)
      return int(i);
  return -1;
}

std::string knownDtypes() {
  std::string list;
  for (const DtypeInfo &d : kDtypes)
    list += (list.empty() ? "" : ", ") + std::string(d.name);
  return list;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

/// shape's element count * elementSize in bytes, or nullopt on overflow.
std::optional<uint64_t> byteCount(const std::vector<int64_t> &shape, int elementSize) {
  uint64_t n = uint64_t(elementSize);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n))
      return std::nullopt;
  return n;
}

std::string systemError() { return std::strerror(errno); }

//===-- Writing ------------------------------------------------------------===//

std::optional<std::string> checkForWriting(const std::vector<TensorData> &tensors,
                                           const std::map<std::string, std::string> &metadata) {
  std::set<std::string_view> names;
  for (const TensorData &t : tensors) {
    const std::string name = quoted(t.name);
    if (t.name == "__metadata__")
      return "\"__metadata__\" is reserved for the metadata and cannot name a tensor";
    if (findInvalidUtf8(t.name))
      return "tensor name " + name + " is not valid UTF-8";
    if (!names.insert(t.name).second)
      return "two tensors are named " + name;
    const int size = dtypeSize(t.dtype);
    if (size == 0)
      return "tensor " + name + ": unknown dtype " + quoted(t.dtype) + " (known: " + knownDtypes() +
             ")";
    for (int64_t d : t.shape)
      if (d < 0)
        return "tensor " + name + ": negative dimension in shape " + shapeText(t.shape);
    std::optional<uint64_t> bytes = byteCount(t.shape, size);
    if (!bytes)
      return "tensor " + name + ": shape " + shapeText(t.shape) + " is too large";
    if (*bytes != t.bytes.size())
      return "tensor " + name + ": has " + std::to_string(t.bytes.size()) + " bytes, but " +
             t.dtype + " " + shapeText(t.shape) + " needs " + std::to_string(*bytes);
  }
  for (const auto &[key, value] : metadata)
    if (findInvalidUtf8(key) || findInvalidUtf8(value))
      return "metadata entry " + quoted(key) + " is not valid UTF-8";
  return std::nullopt;
}

/// The tensors in the reference writer's order: widest dtype first, then
/// by name.
std::vector<const TensorData *> writingOrder(const std::vector<TensorData> &tensors) {
  std::vector<const TensorData *> order;
  for (const TensorData &t : tensors)
    order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorData *a, const TensorData *b) {
    int ra = dtypeRank(a->dtype), rb = dtypeRank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });
  return order;
}

std::string headerJson(const std::vector<const TensorData *> &order,
                       const std::map<std::string, std::string> &metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      json += (first ? "" : ",") + quoteJson(key) + ":" + quoteJson(value);
      first = false;
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (const TensorData *t : order) {
    if (json.size() > 1)
      json += ",";
    json += quoteJson(t->name) + ":{\"dtype\":\"" + t->dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i)
      json += (i ? "," : "") + std::to_string(t->shape[i]);
    const uint64_t end = offset + t->bytes.size();
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  json += "}";
  // Pad to a multiple of 8 so the data (and, with the widest-first order,
  // every tensor) starts aligned.
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

//===-- Reading ------------------------------------------------------------===//

/// The largest header the reference reader accepts.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorEntry {
  TensorData data; ///< name, dtype, shape; bytes filled last
  uint64_t begin = 0, end = 0;
};

std::optional<uint64_t> asUnsigned(const JsonValue &v) {
  if (v.kind != JsonValue::Kind::Number || v.text.empty() || v.text[0] == '-' ||
      v.text.find_first_of(".eE") != std::string::npos)
    return std::nullopt;
  uint64_t n = 0;
  for (char c : v.text)
    if (__builtin_mul_overflow(n, uint64_t(10), &n) ||
        __builtin_add_overflow(n, uint64_t(c - '0'), &n))
      return std::nullopt;
  return n;
}

/// One tensor's header entry: exactly dtype, shape and data_offsets.
std::optional<std::string> parseEntry(const std::string &name, const JsonValue &value,
                                      uint64_t dataBytes, TensorEntry &entry) {
  const std::string tensor = "tensor " + quoted(name);
  if (value.kind != JsonValue::Kind::Object)
    return tensor + ": expected an object with dtype, shape and data_offsets, found " +
           describeJsonKind(value.kind);
  const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (const auto &[key, field] : value.members) {
    const JsonValue **slot = key == "dtype"          ? &dtype
                             : key == "shape"        ? &shape
                             : key == "data_offsets" ? &offsets
                                                     : nullptr;
    if (!slot)
      return tensor + ": unknown field " + quoted(key) +
             " (expected dtype, shape and data_offsets)";
    if (*slot)
      return tensor + ": field " + quoted(key) + " appears twice";
    *slot = &field;
  }
  if (!dtype || !shape || !offsets)
    return tensor + ": missing field " +
           quoted(!dtype   ? "dtype"
                  : !shape ? "shape"
                           : "data_offsets");

  if (dtype->kind != JsonValue::Kind::String)
    return tensor + ": dtype is " + describeJsonKind(dtype->kind) + ", expected a string";
  const int elementSize = dtypeSize(dtype->text);
  if (elementSize == 0)
    return tensor + ": unknown dtype " + quoted(dtype->text) + " (known: " + knownDtypes() + ")";
  entry.data.name = name;
  entry.data.dtype = dtype->text;

  if (shape->kind != JsonValue::Kind::Array)
    return tensor + ": shape is " + describeJsonKind(shape->kind) + ", expected an array";
  for (const JsonValue &d : shape->items) {
    std::optional<uint64_t> n = asUnsigned(d);
    if (!n || *n > uint64_t(std::numeric_limits<int64_t>::max()))
      return tensor + ": shape entries must be non-negative integers, found " +
             (d.kind == JsonValue::Kind::Number ? d.text : describeJsonKind(d.kind));
    entry.data.shape.push_back(int64_t(*n));
  }

  if (offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2)
    return tensor + ": data_offsets must be an array of two integers [begin, end]";
  std::optional<uint64_t> begin = asUnsigned(offsets->items[0]);
  std::optional<uint64_t> end = asUnsigned(offsets->items[1]);
  if (!begin || !end)
    return tensor + ": data_offsets must be non-negative integers";
  entry.begin = *begin, entry.end = *end;
  const std::string range =
      "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "]";
  if (*begin > *end)
    return tensor + ": " + range + " begin after they end";
  if (*end > dataBytes)
    return tensor + ": " + range + " end beyond the " + std::to_string(dataBytes) +
           " bytes of data after the header";
  std::optional<uint64_t> bytes = byteCount(entry.data.shape, elementSize);
  if (!bytes)
    return tensor + ": shape " + shapeText(entry.data.shape) + " is too large";
  if (*bytes != *end - *begin)
    return tensor + ": " + range + " hold " + std::to_string(*end - *begin) + " bytes, but " +
           entry.data.dtype + " " + shapeText(entry.data.shape) + " needs " +
           std::to_string(*bytes);
  return std::nullopt;
}

/// The whole header: metadata and tensor entries, and their offsets
/// covering [0, dataBytes) exactly.
std::optional<std::string> parseHeader(std::string_view header, uint64_t dataBytes,
                                       std::vector<TensorEntry> &entries,
                                       std::map<std::string, std::string> &metadata) {
  if (header.empty() || header[0] != '{')
    return std::string("the header does not start with '{'");
  std::string jsonError;
  std::optional<JsonValue> root = parseJson(header, jsonError);
  if (!root)
    return "the header is not valid JSON: " + jsonError;

  std::set<std::string_view> names;
  bool sawMetadata = false;
  for (const auto &[key, value] : root->members) {
    if (key == "__metadata__") {
      if (sawMetadata)
        return std::string("\"__metadata__\" appears twice");
      sawMetadata = true;
      if (value.kind == JsonValue::Kind::Null) // the reference reads null as no metadata
        continue;
      if (value.kind != JsonValue::Kind::Object)
        return std::string("\"__metadata__\" is ") + describeJsonKind(value.kind) +
               ", expected an object of strings";
      for (const auto &[metaKey, metaValue] : value.members) {
        if (metaValue.kind != JsonValue::Kind::String)
          return "metadata " + quoted(metaKey) + " is " + describeJsonKind(metaValue.kind) +
                 ", expected a string";
        if (!metadata.emplace(metaKey, metaValue.text).second)
          return "metadata key " + quoted(metaKey) + " appears twice";
      }
      continue;
    }
    if (!names.insert(key).second)
      return "duplicate tensor name " + quoted(key);
    TensorEntry entry;
    if (auto error = parseEntry(key, value, dataBytes, entry))
      return error;
    entries.push_back(std::move(entry));
  }

  // The reference reader's rule: in offset order, each tensor starts where
  // the previous one ends, from 0 to the end of the file.
  std::vector<const TensorEntry *> byOffset;
  for (const TensorEntry &e : entries)
    byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(), [](const TensorEntry *a, const TensorEntry *b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorEntry *previous = nullptr;
  auto describe = [](const TensorEntry *e) {
    return "tensor " + quoted(e->data.name) + " [" + std::to_string(e->begin) + ", " +
           std::to_string(e->end) + "]";
  };
  for (const TensorEntry *e : byOffset) {
    if (e->begin < covered)
      return describe(e) + " overlaps " + describe(previous);
    if (e->begin > covered)
      return "bytes [" + std::to_string(covered) + ", " + std::to_string(e->begin) +
             ") of the data belong to no tensor (before " + describe(e) + ")";
    covered = e->end;
    previous = e;
  }
  if (covered != dataBytes)
    return "the last " + std::to_string(dataBytes - covered) + " of the " +
           std::to_string(dataBytes) + " data bytes belong to no tensor";
  return std::nullopt;
}

bool readExactly(int fd, void *out, size_t n, uint64_t offset) {
  char *p = static_cast<char *>(out);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return false;
    }
    p += got, n -= size_t(got), offset += uint64_t(got);
  }
  return true;
}

} // namespace

int dtypeSize(std::string_view dtype) {
  int rank = dtypeRank(dtype);
  return rank < 0 ? 0 : kDtypes[rank].size;
}

TensorData TensorData::fromFloats(std::string name, std::vector<int64_t> shape,
                                  std::span<const float> values) {
  TensorData t{std::move(name), "F32", std::move(shape), {}};
  t.bytes.resize(values.size_bytes());
  if (!values.empty())
    std::memcpy(t.bytes.data(), values.data(), values.size_bytes());
  return t;
}

std::optional<std::vector<float>> TensorData::floats() const {
  if (dtype != "F32" || bytes.size() % sizeof(float) != 0)
    return std::nullopt;
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty())
    std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

const TensorData *SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorData &t, std::string_view n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

std::optional<std::string> writeSafetensors(const std::string &path,
                                            const std::vector<TensorData> &tensors,
                                            const std::map<std::string, std::string> &metadata) {
  if (auto invalid = checkForWriting(tensors, metadata))
    return path + ": not written: " + *invalid;
  const std::vector<const TensorData *> order = writingOrder(tensors);
  const std::string header = headerJson(order, metadata);

  std::string error;
  std::optional<AtomicFileWriter> file = AtomicFileWriter::create(path, error);
  if (!file)
    return error;
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));
  if (auto failed = file->write(length, sizeof length))
    return failed;
  if (auto failed = file->write(header.data(), header.size()))
    return failed;
  for (const TensorData *t : order)
    if (auto failed = file->write(t->bytes.data(), t->bytes.size()))
      return failed;
  return file->commit();
}

std::optional<SafetensorsFile>
readSafetensors(const std::string &path, std::string &error,
                const std::function<bool(std::string_view name)> &wanted) {
  auto fail = [&](const std::string &what) {
    error = path + ": " + what;
    return std::nullopt;
  };
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; the
  // regular-file check below refuses it instead (no effect on regular files).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot open " + path + ": " + systemError();
    return std::nullopt;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat: " + systemError());
  if (!S_ISREG(st.st_mode))
    return fail("not a regular file");
  const uint64_t fileBytes = uint64_t(st.st_size);
  auto readFailed = [&](const std::string &what) {
    const int cause = errno; // 0: the file ended early
    return fail("cannot read " + what + ": " +
                (cause ? std::strerror(cause) : "the file shrank while reading"));
  };

  if (fileBytes < 8)
    return fail("truncated: " + std::to_string(fileBytes) +
                " bytes, too short for the 8-byte header length");
  unsigned char lengthBytes[8];
  if (!readExactly(fd, lengthBytes, 8, 0))
    return readFailed("the header length");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = headerBytes << 8 | lengthBytes[i];
  if (headerBytes > fileBytes - 8)
    return fail("the header length " + std::to_string(headerBytes) + " is longer than the " +
                std::to_string(fileBytes - 8) +
                " bytes after it (truncated file, or not a safetensors file)");
  if (headerBytes > kMaxHeaderBytes)
    return fail("the header length " + std::to_string(headerBytes) + " exceeds the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");

  std::string header(headerBytes, '\0');
  if (!readExactly(fd, header.data(), header.size(), 8))
    return readFailed("the header");
  const uint64_t dataStart = 8 + headerBytes;
  std::vector<TensorEntry> entries;
  SafetensorsFile contents;
  if (auto invalid = parseHeader(header, fileBytes - dataStart, entries, contents.metadata))
    return fail(*invalid);

  for (TensorEntry &e : entries) {
    if (wanted && !wanted(e.data.name)) {
      e.data.loaded = false;
      contents.tensors.push_back(std::move(e.data));
      continue;
    }
    try {
      e.data.bytes.resize(e.end - e.begin);
    } catch (const std::bad_alloc &) {
      return fail("cannot allocate " + std::to_string(e.end - e.begin) + " bytes for tensor " +
                  quoted(e.data.name));
    }
    if (!readExactly(fd, e.data.bytes.data(), e.data.bytes.size(), dataStart + e.begin))
      return readFailed("tensor " + quoted(e.data.name));
    contents.tensors.push_back(std::move(e.data));
  }
  std::sort(contents.tensors.begin(), contents.tensors.end(),
            [](const TensorData &a, const TensorData &b) { return a.name < b.name; });
  return contents;
}

} // namespace mist::rt
