//===- IndexedDataset.cpp - Megatron-LM's indexed datasets (.bin + .idx) --===//
#include "runtime/data/IndexedDataset.h"

#include "runtime/data/ReadExactly.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mist::rt {

namespace {

constexpr unsigned char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

struct DtypeInfo {
  int bytes;
  bool isSigned, isFloat;
  const char *name;
};

/// Megatron-LM's DType codes; code 0 and codes past 8 are not types.
const DtypeInfo *dtypeInfo(int code) {
  static const DtypeInfo kTypes[] = {
      {1, false, false, "uint8"}, {1, true, false, "int8"},    {2, true, false, "int16"},
      {4, true, false, "int32"},  {8, true, false, "int64"},   {8, true, true, "float64"},
      {4, true, true, "float32"}, {2, false, false, "uint16"},
  };
  return code >= 1 && code <= 8 ? &kTypes[code - 1] : nullptr;
}

uint64_t loadU64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = v << 8 | p[i];
  return v;
}

/// Opens `path` for reading if it is a regular file (a FIFO would block in
/// open, a directory reads nothing); -1 with `error` set otherwise.
int openRegular(const std::string &path, int64_t &bytes, std::string &error) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + " is not a regular file";
    return -1;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    error = "cannot open " + path + ": " + std::strerror(errno);
  bytes = st.st_size;
  return fd;
}

std::string withoutSuffix(const std::string &path) {
  for (const char *suffix : {".bin", ".idx"}) {
    const size_t n = std::strlen(suffix);
    if (path.size() > n && path.compare(path.size() - n, n, suffix) == 0)
      return path.substr(0, path.size() - n);
  }
  return path;
}

} // namespace

IndexedDataset::IndexedDataset(IndexedDataset &&other) noexcept { *this = std::move(other); }

IndexedDataset &IndexedDataset::operator=(IndexedDataset &&other) noexcept {
  if (this != &other) {
    this->~IndexedDataset();
    pathPrefix = std::move(other.pathPrefix);
    mapped = std::exchange(other.mapped, nullptr);
    mappedBytes = std::exchange(other.mappedBytes, 0);
    binFd = std::exchange(other.binFd, -1);
    binBytes = other.binBytes;
    dtypeCode = other.dtypeCode, itemBytes = other.itemBytes;
    sequences = other.sequences, documents = other.documents, tokens = other.tokens;
    lengthsAt = other.lengthsAt, pointersAt = other.pointersAt, documentsAt = other.documentsAt;
  }
  return *this;
}

IndexedDataset::~IndexedDataset() {
  if (mapped)
    ::munmap(const_cast<unsigned char *>(mapped), mappedBytes);
  if (binFd >= 0)
    ::close(binFd);
  mapped = nullptr;
  binFd = -1;
}

const char *IndexedDataset::dtypeName() const { return dtypeInfo(dtypeCode)->name; }

std::optional<IndexedDataset> IndexedDataset::open(const std::string &prefixOrFile,
                                                   std::string &error) {
  IndexedDataset d;
  d.pathPrefix = withoutSuffix(prefixOrFile);
  const std::string idx = d.pathPrefix + ".idx", bin = d.pathPrefix + ".bin";

  int64_t idxBytes = 0;
  const int idxFd = openRegular(idx, idxBytes, error);
  if (idxFd < 0)
    return std::nullopt;
  if (size_t(idxBytes) < kHeaderBytes) {
    ::close(idxFd);
    error = idx + ": " + std::to_string(idxBytes) + " bytes are too few for an index header (" +
            std::to_string(kHeaderBytes) + ")";
    return std::nullopt;
  }
  void *map = ::mmap(nullptr, size_t(idxBytes), PROT_READ, MAP_PRIVATE, idxFd, 0);
  ::close(idxFd);
  if (map == MAP_FAILED) {
    error = "cannot map " + idx + ": " + std::strerror(errno);
    return std::nullopt;
  }
  d.mapped = static_cast<const unsigned char *>(map);
  d.mappedBytes = size_t(idxBytes);

  const unsigned char *h = d.mapped;
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) {
    error = idx + ": not a Megatron-LM index (it does not start with \"MMIDIDX\")";
    return std::nullopt;
  }
  if (const uint64_t version = loadU64(h + 9); version != 1) {
    error = idx + ": index version " + std::to_string(version) + " (only version 1 is known)";
    return std::nullopt;
  }
  d.dtypeCode = h[17];
  const DtypeInfo *type = dtypeInfo(d.dtypeCode);
  if (!type) {
    error = idx + ": unknown token type code " + std::to_string(d.dtypeCode) +
            " (Megatron-LM's codes are 1 to 8)";
    return std::nullopt;
  }
  if (type->isFloat) {
    error = idx + ": tokens of type " + type->name + " are not token ids (an integer type is)";
    return std::nullopt;
  }
  d.itemBytes = type->bytes;
  const uint64_t sequences = loadU64(h + 18), documents = loadU64(h + 26);
  // The arrays' sizes must add up to the file's: 12 bytes a sequence and 8 a
  // document entry (a multimodal index adds a byte a sequence).
  const uint64_t body = uint64_t(idxBytes) - kHeaderBytes;
  if (sequences > body / 12 || documents > body / 8 || sequences * 12 + documents * 8 != body) {
    const bool multimodal =
        sequences <= body / 13 && documents <= body / 8 && sequences * 13 + documents * 8 == body;
    error = idx + ": " +
            (multimodal
                 ? std::string("a multimodal index (sequence modes); a GPT dataset has none")
                 : std::to_string(sequences) + " sequences and " + std::to_string(documents) +
                       " document entries do not fill its " + std::to_string(idxBytes) + " bytes");
    return std::nullopt;
  }
  if (sequences == 0 || sequences > uint64_t(INT32_MAX) || documents < 2) {
    error = idx + ": " + std::to_string(sequences) + " sequences in " +
            std::to_string(documents > 0 ? documents - 1 : 0) +
            " documents (a dataset needs at least one, and at most 2^31 - 1 sequences)";
    return std::nullopt;
  }
  d.sequences = int64_t(sequences);
  d.documents = int64_t(documents);
  d.lengthsAt = kHeaderBytes;
  d.pointersAt = d.lengthsAt + 4 * sequences;
  d.documentsAt = d.pointersAt + 8 * sequences;

  d.binFd = openRegular(bin, d.binBytes, error);
  if (d.binFd < 0)
    return std::nullopt;
  for (int64_t i = 0; i < d.sequences; ++i) {
    const int64_t length = d.sequenceLength(i), pointer = d.sequencePointer(i);
    if (length < 0 || pointer < 0 || pointer > d.binBytes ||
        length > (d.binBytes - pointer) / d.itemBytes) {
      error = idx + ": sequence " + std::to_string(i) + " (" + std::to_string(length) +
              " tokens at byte " + std::to_string(pointer) + ") is not inside " + bin + " (" +
              std::to_string(d.binBytes) + " bytes)";
      return std::nullopt;
    }
    d.tokens += length;
  }
  int64_t previous = 0;
  for (int64_t i = 0; i < d.documents; ++i) {
    const int64_t first = d.load<int64_t>(d.documentsAt + 8 * size_t(i));
    const bool ok = i == 0 ? first == 0
                           : first >= previous && first <= d.sequences &&
                                 (i + 1 < d.documents || first == d.sequences);
    if (!ok) {
      error = idx + ": document entry " + std::to_string(i) + " is " + std::to_string(first) +
              " (entries rise from 0 to the sequence count, " + std::to_string(d.sequences) + ")";
      return std::nullopt;
    }
    previous = first;
  }
  return d;
}

std::optional<std::string> IndexedDataset::read(int64_t sequence, int64_t offset, int64_t n,
                                                uint32_t *out, uint64_t vocabulary) const {
  if (sequence < 0 || sequence >= sequences || offset < 0 || n < 0 ||
      offset + n > sequenceLength(sequence))
    return pathPrefix + ".bin: tokens [" + std::to_string(offset) + ", " +
           std::to_string(offset + n) + ") of sequence " + std::to_string(sequence) +
           " are outside it";
  const DtypeInfo &type = *dtypeInfo(dtypeCode);
  std::vector<unsigned char> raw(size_t(n) * size_t(itemBytes));
  const off_t at = off_t(sequencePointer(sequence) + offset * itemBytes);
  if (!readExactly(binFd, raw.data(), raw.size(), at))
    return "cannot read " + pathPrefix + ".bin: " + readFailure() +
           " (did it change while training?)";
  const unsigned char *p = raw.data();
  for (int64_t i = 0; i < n; ++i, p += itemBytes) {
    uint64_t bits = 0;
    for (int b = itemBytes - 1; b >= 0; --b)
      bits = bits << 8 | p[b];
    int64_t value = int64_t(bits);
    if (type.isSigned && itemBytes < 8 && (bits >> (8 * itemBytes - 1)) & 1)
      value = int64_t(bits) - (int64_t(1) << (8 * itemBytes)); // sign-extend
    if (value < 0 || uint64_t(value) >= vocabulary)
      return pathPrefix + ".bin: token " + std::to_string(offset + i) + " of sequence " +
             std::to_string(sequence) + " is " + std::to_string(value) +
             ", outside the model's vocabulary [0, " + std::to_string(vocabulary) + ")";
    out[i] = uint32_t(value);
  }
  return std::nullopt;
}

uint64_t IndexedDataset::fingerprint() const {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](unsigned char byte) {
    hash ^= byte;
    hash *= 1099511628211ull;
  };
  for (size_t i = 0; i < mappedBytes; ++i)
    mix(mapped[i]);
  for (int i = 0; i < 8; ++i)
    mix(static_cast<unsigned char>(uint64_t(binBytes) >> (8 * i)));
  return hash;
}

} // namespace mist::rt
