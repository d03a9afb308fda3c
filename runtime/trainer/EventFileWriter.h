//===- EventFileWriter.h - TensorBoard's event files, written by hand ------===//
/// \file
/// What TensorBoard reads (`tensorboard --logdir DIR`): a file
/// `events.out.tfevents.<seconds>.<host>.<pid>` of TFRecord records (length, its
/// masked CRC-32C, the bytes, their masked CRC-32C), each an `Event`
/// protocol buffer: the first names the file version, the others hold a
/// step's scalar summaries. Only the few fields scalars need are encoded
/// (wall_time, step, file_version, summary.value{tag, simple_value}), so
/// the trainer needs no protobuf or TensorFlow library. The test
/// tests/trainer/metrics.sh reads the file back with TensorBoard's own
/// event reader where it is installed.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace mist::rt {

class EventFileWriter {
public:
  /// Creates `dir`/events.out.tfevents.<now>.<host>.<pid> and writes the version
  /// event; `error` says why not (the writer is then closed).
  EventFileWriter(const std::string &dir, const std::string &host, std::string &error);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter &) = delete;
  EventFileWriter &operator=(const EventFileWriter &) = delete;

  bool open() const { return file != nullptr; }
  const std::string &path() const { return filePath; }
  /// One event at `step` holding these (tag, value) scalars, flushed.
  void scalars(int64_t step, double wallTime,
               const std::vector<std::pair<std::string, float>> &values);

private:
  void record(const std::string &event);
  std::FILE *file = nullptr;
  std::string filePath;
};

/// CRC-32C (Castagnoli) of `n` bytes: what TFRecord framing checksums.
uint32_t crc32c(const void *data, size_t n);

} // namespace mist::rt
