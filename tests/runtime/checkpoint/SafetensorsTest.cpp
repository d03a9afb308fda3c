//===- SafetensorsTest.cpp - safetensors: round trip, bytes, every error --===//
/// Round trips, the exact bytes of the reference writer (its own test
/// vectors from huggingface/safetensors' tensor.rs, and a mixed-dtype file
/// that shows its ordering and padding), every reader and writer error, and
/// that a failed write leaves the previous checkpoint untouched.
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Safetensors.h"
#include "tests/runtime/data/TempDirectory.h"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mist::rt;
using mist::rt::testing::readBytes;
using mist::rt::testing::TempDirectory;
using mist::rt::testing::writeBytes;

namespace {

std::vector<std::byte> rawBytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (unsigned v : values)
    out.push_back(std::byte(v));
  return out;
}

template <typename T> std::vector<std::byte> bytesOf(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

std::vector<unsigned char> lengthPrefixed(std::string_view header) {
  std::vector<unsigned char> bytes(8);
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  return bytes;
}

/// A file with `header` (length-prefixed) and `dataBytes` bytes after it.
void craft(const std::string &path, std::string_view header, size_t dataBytes) {
  std::vector<unsigned char> bytes = lengthPrefixed(header);
  bytes.resize(bytes.size() + dataBytes, 0xAB);
  writeBytes(path, bytes);
}

std::string readError(const std::string &path) {
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(path, error);
  EXPECT_FALSE(file.has_value()) << path << " was read, but it should not";
  return error;
}

/// The error for a crafted file whose header is `header` with `dataBytes`
/// of data, without the "<path>: " prefix.
std::string headerError(std::string_view header, size_t dataBytes) {
  TempDirectory tmp;
  const std::string path = tmp.path("crafted.safetensors");
  craft(path, header, dataBytes);
  std::string error = readError(path);
  const std::string prefix = path + ": ";
  EXPECT_EQ(error.substr(0, prefix.size()), prefix) << "the error names the file";
  return error.size() >= prefix.size() ? error.substr(prefix.size()) : error;
}

/// Whether a crafted file with `header` and `dataBytes` of data reads.
bool headerAccepted(std::string_view header, size_t dataBytes) {
  TempDirectory tmp;
  const std::string path = tmp.path("crafted.safetensors");
  craft(path, header, dataBytes);
  std::string error;
  const bool read = readSafetensors(path, error).has_value();
  EXPECT_TRUE(read) << error;
  return read;
}

bool hasTemporaryFiles(const std::filesystem::path &dir) {
  for (const auto &entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      return true;
  return false;
}

std::vector<TensorData> exampleTensors() {
  const float matrix[] = {0.5f, -1.25f, 2.f, 3.75f, -0.f, 1e-3f};
  const float scalar[] = {42.f};
  return {
      TensorData::fromFloats("w.matrix", {2, 3}, matrix),
      TensorData::fromFloats("w.scalar", {}, scalar),
      {"h.bf16", "BF16", {2}, bytesOf<uint16_t>({0x3F80, 0xC040})},
      {"h.f16", "F16", {3}, bytesOf<uint16_t>({0x3C00, 0xC000, 0x3800})},
      {"i.ids", "I32", {4}, bytesOf<int32_t>({-1, 0, 7, 2147483647})},
      {"u.tokens", "U16", {2, 2}, bytesOf<uint16_t>({0, 1, 65535, 256})},
      {"z.empty", "F32", {0, 3}, {}},
  };
}

} // namespace

TEST(Safetensors, RoundTrip) {
  TempDirectory tmp;
  const std::string path = tmp.path("model.safetensors");
  const std::vector<TensorData> tensors = exampleTensors();
  const std::map<std::string, std::string> metadata = {
      {"step", "12"}, {"plan", "dp=2 tp=1"}, {"note", "quote \" tab \t \xC3\xA9"}};
  ASSERT_EQ(writeSafetensors(path, tensors, metadata), std::nullopt);
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));

  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->metadata, metadata);
  ASSERT_EQ(file->tensors.size(), tensors.size());
  for (const TensorData &expected : tensors) {
    const TensorData *got = file->find(expected.name);
    ASSERT_NE(got, nullptr) << expected.name;
    EXPECT_EQ(got->dtype, expected.dtype);
    EXPECT_EQ(got->shape, expected.shape);
    EXPECT_EQ(got->bytes, expected.bytes) << expected.name;
  }
  for (size_t i = 1; i < file->tensors.size(); ++i)
    EXPECT_LT(file->tensors[i - 1].name, file->tensors[i].name) << "sorted by name";
  EXPECT_EQ(file->find("absent"), nullptr);
  EXPECT_EQ(file->find("w.scalar")->floats(), std::vector<float>{42.f});
  EXPECT_EQ(file->find("w.matrix")->floats(),
            (std::vector<float>{0.5f, -1.25f, 2.f, 3.75f, -0.f, 1e-3f}));
  EXPECT_EQ(file->find("h.bf16")->floats(), std::nullopt);
}

TEST(Safetensors, SelectiveReadListsAllAndReadsTheWanted) {
  TempDirectory tmp;
  const std::string path = tmp.path("model.safetensors");
  const std::vector<TensorData> tensors = exampleTensors();
  ASSERT_EQ(writeSafetensors(path, tensors), std::nullopt);
  std::string error;
  auto file = readSafetensors(path, error, [](std::string_view n) { return n == "w.matrix"; });
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors.size(), tensors.size()) << "every tensor is listed";
  for (const TensorData &expected : tensors) {
    const TensorData *got = file->find(expected.name);
    ASSERT_NE(got, nullptr) << expected.name;
    EXPECT_EQ(got->shape, expected.shape);
    EXPECT_EQ(got->loaded, expected.name == "w.matrix") << expected.name;
    EXPECT_EQ(got->bytes.empty(), expected.name != "w.matrix") << expected.name;
  }
  EXPECT_EQ(file->find("w.matrix")->floats(),
            (std::vector<float>{0.5f, -1.25f, 2.f, 3.75f, -0.f, 1e-3f}));
}

TEST(Safetensors, RoundTripOfNothing) {
  TempDirectory tmp;
  const std::string path = tmp.path("empty.safetensors");
  ASSERT_EQ(writeSafetensors(path, {}), std::nullopt);
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->tensors.empty());
  EXPECT_TRUE(file->metadata.empty());
}

// The reference's own serialization test vectors (safetensors/src/tensor.rs:
// test_serialization and test_empty).
TEST(Safetensors, ReferenceTestVectors) {
  TempDirectory tmp;
  const std::string path = tmp.path("ref.safetensors");
  const float values[] = {0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  ASSERT_EQ(writeSafetensors(path, {TensorData::fromFloats("attn.0", {1, 2, 3}, values)}),
            std::nullopt);
  const std::vector<unsigned char> expected = {
      64, 0,  0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,
      34, 58, 123, 34,  100, 116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,
      44, 34, 115, 104, 97,  112, 101, 34,  58,  91,  49,  44,  50,  44,  51,  93,
      44, 34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
      91, 48, 44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
      0,  0,  0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64};
  EXPECT_EQ(readBytes(path), expected);

  ASSERT_EQ(writeSafetensors(path, {}), std::nullopt);
  EXPECT_EQ(readBytes(path),
            (std::vector<unsigned char>{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));

  ASSERT_EQ(writeSafetensors(path, {}, {{"framework", "pt"}}), std::nullopt);
  EXPECT_EQ(readBytes(path),
            (std::vector<unsigned char>{
                40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32}));
}

// Widest dtype first, then by name; metadata first; spaces to a multiple of 8.
TEST(Safetensors, GoldenBytesOfMixedDtypes) {
  TempDirectory tmp;
  const std::string path = tmp.path("mixed.safetensors");
  const float scalar[] = {1.f};
  ASSERT_EQ(writeSafetensors(path,
                             {{"b", "F16", {2}, bytesOf<uint16_t>({0x3C00, 0x4000})},
                              {"c", "I32", {1}, bytesOf<int32_t>({-2})},
                              TensorData::fromFloats("a", {}, scalar)},
                             {{"step", "3"}}),
            std::nullopt);
  const std::string header =
      R"({"__metadata__":{"step":"3"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("c":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
      R"("b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]}})"
      "    ";
  ASSERT_EQ(header.size(), 192u);
  std::vector<unsigned char> expected = lengthPrefixed(header);
  const unsigned char data[] = {0x00, 0x00, 0x80, 0x3F, 0xFE, 0xFF,
                                0xFF, 0xFF, 0x00, 0x3C, 0x00, 0x40};
  expected.insert(expected.end(), std::begin(data), std::end(data));
  EXPECT_EQ(readBytes(path), expected);
}

//===-- Reader errors -------------------------------------------------------===//

TEST(SafetensorsReader, MissingFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("absent.safetensors");
  EXPECT_EQ(readError(path), "cannot open " + path + ": No such file or directory");
}

TEST(SafetensorsReader, TruncatedHeaderLength) {
  TempDirectory tmp;
  const std::string path = tmp.path("short.safetensors");
  writeBytes(path, {8, 0, 0, 0, 0});
  EXPECT_EQ(readError(path), path + ": truncated: 5 bytes, too short for the 8-byte header length");
}

TEST(SafetensorsReader, HeaderLongerThanFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("long.safetensors");
  std::vector<unsigned char> bytes = lengthPrefixed("{}      ");
  bytes[0] = 0xE8, bytes[1] = 0x03; // 1000
  writeBytes(path, bytes);
  EXPECT_EQ(readError(path), path + ": the header length 1000 is longer than the 8 bytes after "
                                    "it (truncated file, or not a safetensors file)");
  bytes[7] = 0x80; // 2^63 + 1000: no overflow in the check
  writeBytes(path, bytes);
  EXPECT_NE(readError(path).find("is longer than the 8 bytes after it"), std::string::npos);
}

TEST(SafetensorsReader, HeaderOverTheReferenceLimit) {
  TempDirectory tmp;
  const std::string path = tmp.path("huge.safetensors");
  std::vector<unsigned char> bytes = lengthPrefixed("{}");
  const uint64_t length = 100'000'008;
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<unsigned char>(length >> (8 * i));
  writeBytes(path, bytes);
  std::filesystem::resize_file(path, 8 + length); // sparse: costs no disk
  EXPECT_EQ(readError(path),
            path + ": the header length 100000008 exceeds the limit of 100000000 bytes");
}

TEST(SafetensorsReader, BadJson) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32",}})", 0),
            "the header is not valid JSON: byte 20: expected a string key in an object, "
            "found '}'");
  EXPECT_EQ(headerError("[]      ", 0), "the header does not start with '{'");
  EXPECT_EQ(headerError(" {}     ", 0), "the header does not start with '{'");
  EXPECT_EQ(headerError("{}x     ", 0),
            "the header is not valid JSON: byte 2: unexpected 'x' after the JSON value");
  EXPECT_EQ(headerError("{\"\xFF\":1}", 0),
            "the header is not valid JSON: byte 2: not valid UTF-8");
  EXPECT_EQ(headerError("", 0), "the header does not start with '{'");
  // Trailing spaces (the padding) and other JSON whitespace are fine.
  EXPECT_TRUE(headerAccepted("{}\n\t  ", 0));
}

TEST(SafetensorsReader, UnknownDtype) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", 4),
            "tensor 'a': unknown dtype 'F31' (known: BOOL, U8, I8, I16, U16, F16, BF16, I32, "
            "U32, F32, F64, I64, U64)");
  EXPECT_NE(headerError(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4)
                .find("unknown dtype 'f32'"),
            std::string::npos);
  EXPECT_EQ(headerError(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4),
            "tensor 'a': dtype is a number, expected a string");
}

TEST(SafetensorsReader, OffsetsOutOfRange) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
            "tensor 'a': data_offsets [0, 8] end beyond the 4 bytes of data after the header");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
            "tensor 'a': data_offsets [8, 4] begin after they end");
  EXPECT_EQ(headerError(
                R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}})", 4),
            "tensor 'a': data_offsets must be non-negative integers");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4),
            "tensor 'a': data_offsets must be an array of two integers [begin, end]");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-0,4]}})", 4),
            "tensor 'a': data_offsets must be non-negative integers");
}

TEST(SafetensorsReader, OffsetsOverlapOrLeaveGaps) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
            "tensor 'b' [4, 12] overlaps tensor 'a' [0, 8]");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                        4),
            "tensor 'b' [0, 4] overlaps tensor 'a' [0, 4]");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        12),
            "bytes [4, 8) of the data belong to no tensor (before tensor 'b' [8, 12])");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
            "the last 4 of the 8 data bytes belong to no tensor");
  // Out of order in the header is fine (the reference sorts by offset), and
  // so are empty tensors between others.
  EXPECT_TRUE(headerAccepted(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                             R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                             8));
}

TEST(SafetensorsReader, WrongSize) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
            "tensor 'a': data_offsets [0, 8] hold 8 bytes, but F32 [3] needs 12");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"BF16","shape":[],"data_offsets":[0,4]}})", 4),
            "tensor 'a': data_offsets [0, 4] hold 4 bytes, but BF16 [] needs 2");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],)"
                        R"("data_offsets":[0,0]}})",
                        0),
            "tensor 'a': shape [4294967296, 4294967296] is too large");
}

TEST(SafetensorsReader, BadShape) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
            "tensor 'a': shape entries must be non-negative integers, found -1");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4),
            "tensor 'a': shape entries must be non-negative integers, found 1.0");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})", 4),
            "tensor 'a': shape entries must be non-negative integers, found a string");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4),
            "tensor 'a': shape is a number, expected an array");
}

TEST(SafetensorsReader, DuplicateName) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        8),
            "duplicate tensor name 'a'");
}

TEST(SafetensorsReader, BadEntries) {
  EXPECT_EQ(headerError(R"({"a":[1]})", 0),
            "tensor 'a': expected an object with dtype, shape and data_offsets, found an array");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
            "tensor 'a': unknown field 'x' (expected dtype, shape and data_offsets)");
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4),
            "tensor 'a': missing field 'shape'");
  EXPECT_EQ(
      headerError(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
      "tensor 'a': field 'dtype' appears twice");
}

TEST(SafetensorsReader, BadMetadata) {
  EXPECT_EQ(headerError(R"({"__metadata__":{"k":1}})", 0),
            "metadata 'k' is a number, expected a string");
  EXPECT_EQ(headerError(R"({"__metadata__":{"k":"1","k":"2"}})", 0),
            "metadata key 'k' appears twice");
  EXPECT_EQ(headerError(R"({"__metadata__":{},"__metadata__":{}})", 0),
            "\"__metadata__\" appears twice");
  EXPECT_EQ(headerError(R"({"__metadata__":"x"})", 0),
            "\"__metadata__\" is a string, expected an object of strings");
  EXPECT_TRUE(headerAccepted(R"({"__metadata__":null})", 0)); // as the reference reads it
}

TEST(SafetensorsReader, DataShorterThanHeaderSays) {
  // A file cut inside its data: the offsets end beyond it.
  TempDirectory tmp;
  const std::string path = tmp.path("cut.safetensors");
  ASSERT_EQ(writeSafetensors(path, exampleTensors()), std::nullopt);
  std::vector<unsigned char> bytes = readBytes(path);
  bytes.resize(bytes.size() - 1);
  writeBytes(path, bytes);
  EXPECT_NE(readError(path).find("end beyond the"), std::string::npos);
}

//===-- Writer errors and atomicity -----------------------------------------===//

TEST(SafetensorsWriter, RejectsInvalidTensors) {
  TempDirectory tmp;
  const std::string path = tmp.path("w.safetensors");
  const std::string prefix = path + ": not written: ";
  auto f32 = [](std::string name, std::vector<int64_t> shape, size_t bytes) {
    return TensorData{std::move(name), "F32", std::move(shape), std::vector<std::byte>(bytes)};
  };
  EXPECT_EQ(writeSafetensors(path, {f32("a", {1}, 4), f32("a", {1}, 4)}),
            prefix + "two tensors are named 'a'");
  EXPECT_EQ(writeSafetensors(path, {f32("a", {3}, 8)}),
            prefix + "tensor 'a': has 8 bytes, but F32 [3] needs 12");
  EXPECT_EQ(writeSafetensors(path, {{"a", "F8", {1}, rawBytes({0})}}),
            prefix + "tensor 'a': unknown dtype 'F8' (known: BOOL, U8, I8, I16, U16, F16, BF16, "
                     "I32, U32, F32, F64, I64, U64)");
  EXPECT_EQ(writeSafetensors(path, {f32("__metadata__", {1}, 4)}),
            prefix + "\"__metadata__\" is reserved for the metadata and cannot name a tensor");
  EXPECT_EQ(writeSafetensors(path, {f32("a", {-1}, 0)}),
            prefix + "tensor 'a': negative dimension in shape [-1]");
  EXPECT_EQ(writeSafetensors(path, {f32("\xFF", {1}, 4)}),
            prefix + "tensor name '\xFF' is not valid UTF-8");
  EXPECT_EQ(writeSafetensors(path, {}, {{"k", "\xC0\xAF"}}),
            prefix + "metadata entry 'k' is not valid UTF-8");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));
}

TEST(SafetensorsWriter, OverwriteReplacesTheFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("ckpt.safetensors");
  const float one[] = {1.f}, two[] = {2.f, 3.f};
  ASSERT_EQ(writeSafetensors(path, {TensorData::fromFloats("x", {1}, one)}), std::nullopt);
  ASSERT_EQ(writeSafetensors(path, {TensorData::fromFloats("y", {2}, two)}), std::nullopt);
  std::string error;
  std::optional<SafetensorsFile> file = readSafetensors(path, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors.size(), 1u);
  EXPECT_EQ(file->tensors[0].name, "y");
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));
}

TEST(SafetensorsWriter, InvalidListLeavesTheOldFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("ckpt.safetensors");
  ASSERT_EQ(writeSafetensors(path, exampleTensors(), {{"step", "1"}}), std::nullopt);
  const std::vector<unsigned char> before = readBytes(path);
  std::vector<TensorData> broken = exampleTensors();
  broken[0].bytes.pop_back();
  EXPECT_TRUE(writeSafetensors(path, broken, {{"step", "2"}}));
  EXPECT_EQ(readBytes(path), before);
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));
}

// A write that fails half way (here: the file size limit, which binds root
// too) leaves the old checkpoint and no temporary file.
TEST(SafetensorsWriter, FailedWriteLeavesTheOldFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("ckpt.safetensors");
  ASSERT_EQ(writeSafetensors(path, exampleTensors(), {{"step", "1"}}), std::nullopt);
  const std::vector<unsigned char> before = readBytes(path);

  std::vector<float> big(1 << 16, 0.5f);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN); // fail with EFBIG instead of dying
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::optional<std::string> error =
      writeSafetensors(path, {TensorData::fromFloats("big", {int64_t(big.size())}, big)});
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, oldHandler);

  ASSERT_TRUE(error);
  EXPECT_NE(error->find("cannot write " + path + ".tmp."), std::string::npos) << *error;
  EXPECT_NE(error->find("File too large"), std::string::npos) << *error;
  EXPECT_EQ(readBytes(path), before);
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));
}

TEST(SafetensorsWriter, FailedRenameLeavesTheTarget) {
  TempDirectory tmp;
  const std::string path = tmp.path("ckpt.safetensors");
  std::filesystem::create_directory(path); // something rename cannot replace
  writeBytes(path + "/keep", {1, 2, 3});
  const float one[] = {1.f};
  std::optional<std::string> error =
      writeSafetensors(path, {TensorData::fromFloats("x", {1}, one)});
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("cannot rename " + path + ".tmp."), std::string::npos) << *error;
  EXPECT_EQ(readBytes(path + "/keep"), (std::vector<unsigned char>{1, 2, 3}));
  EXPECT_FALSE(hasTemporaryFiles(tmp.dir()));
}

TEST(SafetensorsWriter, ReadOnlyDirectoryLeavesTheOldFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes into read-only directories; FailedWriteLeavesTheOldFile and "
                    "FailedRenameLeavesTheTarget cover the failure paths";
  TempDirectory tmp;
  const std::string dir = tmp.path("ro");
  std::filesystem::create_directory(dir);
  const std::string path = dir + "/ckpt.safetensors";
  ASSERT_EQ(writeSafetensors(path, exampleTensors()), std::nullopt);
  const std::vector<unsigned char> before = readBytes(path);
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  std::optional<std::string> error = writeSafetensors(path, exampleTensors(), {{"k", "v"}});
  ::chmod(dir.c_str(), 0755);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("cannot create " + path + ".tmp."), std::string::npos) << *error;
  EXPECT_NE(error->find("Permission denied"), std::string::npos) << *error;
  EXPECT_EQ(readBytes(path), before);
}

TEST(SafetensorsWriter, MissingDirectory) {
  TempDirectory tmp;
  const std::string path = tmp.path("no/such/ckpt.safetensors");
  std::optional<std::string> error = writeSafetensors(path, {});
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("No such file or directory"), std::string::npos) << *error;
}

TEST(SafetensorsReader, AFifoIsRefusedWithoutWaitingForAWriter) {
  // Opening a FIFO for reading blocks until a writer comes; a resume hung.
  TempDirectory tmp;
  const std::string path = tmp.path("fifo.safetensors");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::string error;
  EXPECT_FALSE(readSafetensors(path, error).has_value());
  EXPECT_EQ(error, path + ": not a regular file");
}
