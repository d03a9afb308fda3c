//===- EventFileWriter.cpp - TensorBoard's event files, written by hand ----===//
#include "runtime/trainer/EventFileWriter.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace mist::rt {

namespace {

std::array<uint32_t, 256> crcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1; // the Castagnoli polynomial, reflected
    t[i] = c;
  }
  return t;
}

/// TFRecord's masked CRC: rotated and offset, so a CRC of CRCs stays strong.
uint32_t maskedCrc(const void *data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Protocol buffer encoding of the few fields an Event with scalars has.
void varint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += char(v);
}
void fixed(std::string &out, const void *bytes, size_t n) {
  out.append(static_cast<const char *>(bytes), n);
}
void bytesField(std::string &out, int field, const std::string &value) {
  varint(out, uint64_t(field) << 3 | 2); // length-delimited
  varint(out, value.size());
  out += value;
}
void doubleField(std::string &out, int field, double v) {
  varint(out, uint64_t(field) << 3 | 1); // 64-bit
  fixed(out, &v, sizeof v);              // little-endian hosts only (x86-64, aarch64)
}
void floatField(std::string &out, int field, float v) {
  varint(out, uint64_t(field) << 3 | 5); // 32-bit
  fixed(out, &v, sizeof v);
}
void intField(std::string &out, int field, int64_t v) {
  varint(out, uint64_t(field) << 3 | 0); // varint
  varint(out, uint64_t(v));
}

} // namespace

uint32_t crc32c(const void *data, size_t n) {
  static const std::array<uint32_t, 256> table = crcTable();
  uint32_t c = 0xffffffffu;
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

EventFileWriter::EventFileWriter(const std::string &dir, const std::string &host,
                                 std::string &error) {
  const std::time_t now = std::time(nullptr);
  // As TensorBoard's writers name theirs; a file of another run is never
  // overwritten (exclusive creation, a counter on a clash).
  const std::string base = dir + "/events.out.tfevents." + std::to_string(now) + "." + host + "." +
                           std::to_string(getpid());
  for (int n = 0; n < 100 && !file; ++n) {
    filePath = n == 0 ? base : base + "." + std::to_string(n);
    file = std::fopen(filePath.c_str(), "wbx");
    if (!file && errno != EEXIST)
      break;
  }
  if (!file) {
    error = "cannot create " + filePath + ": " + std::strerror(errno);
    return;
  }
  std::string event; // Event{wall_time = 1, file_version = 3}
  doubleField(event, 1, double(now));
  bytesField(event, 3, "brain.Event:2");
  record(event);
}

EventFileWriter::~EventFileWriter() {
  if (file)
    std::fclose(file);
}

void EventFileWriter::scalars(int64_t step, double wallTime,
                              const std::vector<std::pair<std::string, float>> &values) {
  if (!file)
    return;
  std::string summary; // Summary{repeated Value value = 1}
  for (const auto &[tag, value] : values) {
    std::string v; // Value{tag = 1, simple_value = 2}
    bytesField(v, 1, tag);
    floatField(v, 2, value);
    bytesField(summary, 1, v);
  }
  std::string event; // Event{wall_time = 1, step = 2, summary = 5}
  doubleField(event, 1, wallTime);
  intField(event, 2, step);
  bytesField(event, 5, summary);
  record(event);
}

void EventFileWriter::record(const std::string &event) {
  const uint64_t length = event.size();
  const uint32_t lengthCrc = maskedCrc(&length, sizeof length),
                 dataCrc = maskedCrc(event.data(), event.size());
  std::fwrite(&length, sizeof length, 1, file);
  std::fwrite(&lengthCrc, sizeof lengthCrc, 1, file);
  std::fwrite(event.data(), 1, event.size(), file);
  std::fwrite(&dataCrc, sizeof dataCrc, 1, file);
  std::fflush(file);
}

} // namespace mist::rt
