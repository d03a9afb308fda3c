//===- EventFileWriterTest.cpp - TensorBoard's framing, byte by byte ------===//
/// The checksum against its published check value, and a written file's
/// framing read back: TFRecord lengths and masked CRCs, the version event
/// first. (tests/trainer/metrics.sh reads a trainer's file with
/// TensorBoard's own reader where it is installed.)
#include "runtime/trainer/EventFileWriter.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <unistd.h>

using namespace mist::rt;

TEST(EventFileWriter, Crc32cHasItsCheckValue) {
  // The CRC-32C check value (RFC 3720, appendix B.4: "123456789").
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST(EventFileWriter, RecordsAreFramedAndChecksummed) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("mist-events-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path;
  {
    std::string error;
    EventFileWriter w(dir, "testhost", error);
    ASSERT_TRUE(w.open()) << error;
    w.scalars(7, 1.5, {{"loss", 2.25f}});
    path = w.path();
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto masked = [](const void *p, size_t n) {
    const uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
  };
  size_t at = 0, records = 0;
  std::string last;
  while (at < bytes.size()) {
    ASSERT_LE(at + 12, bytes.size());
    uint64_t length;
    uint32_t lengthCrc, dataCrc;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&lengthCrc, bytes.data() + at + 8, 4);
    EXPECT_EQ(lengthCrc, masked(&length, 8));
    ASSERT_LE(at + 12 + length + 4, bytes.size());
    last = bytes.substr(at + 12, length);
    std::memcpy(&dataCrc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(dataCrc, masked(last.data(), last.size()));
    if (records == 0) { // the version event
      EXPECT_NE(last.find("brain.Event:2"), std::string::npos);
    }
    at += 12 + length + 4;
    ++records;
  }
  EXPECT_EQ(records, 2u);
  // The scalar event: its tag and the value's four bytes after field 2's key (0x15).
  EXPECT_NE(last.find("loss"), std::string::npos);
  const float value = 2.25f;
  std::string key = "\x15" + std::string(reinterpret_cast<const char *>(&value), 4);
  EXPECT_NE(last.find(key), std::string::npos);
  std::filesystem::remove_all(dir);
}
