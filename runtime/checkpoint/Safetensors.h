//===- Safetensors.h - Checkpoint tensors in the safetensors format -------===//
/// \file
/// The safetensors format (https://github.com/huggingface/safetensors): an
/// 8-byte little-endian header length N, N bytes of JSON
///
///   {"__metadata__":{"key":"value",...},
///    "name":{"dtype":"F32","shape":[2,3],"data_offsets":[begin,end]},...}
///
/// padded with spaces to a multiple of 8, then the tensors' raw little-endian
/// bytes, row-major, back to back; offsets count from the end of the header.
///
/// The writer produces what the reference writer (the `safetensors` Python
/// package) produces for the same tensors: compact JSON, metadata first (its
/// keys sorted here), tensors ordered by the reference's dtype order from
/// widest to narrowest (so every tensor is aligned to its element size) and
/// then by name, spaces to a multiple of 8. It is atomic (AtomicFile.h).
///
/// The reader checks everything and names the file and the problem: header
/// length inside the file, UTF-8, JSON syntax, the schema (no unknown or
/// missing fields, no duplicate names), known dtypes, non-negative integer
/// shapes and offsets, shape * element size == the offset range, and that
/// the tensors cover the data exactly (sorted by offset, each starts where
/// the previous ends, the last ends at the end of the file), as the
/// reference reader demands. `"__metadata__": null` reads as no metadata, as
/// there. Stricter than the reference on purpose: duplicate names (it keeps
/// the last), unknown fields (it ignores them; they might change what the
/// bytes mean) and whitespace before the opening '{' are errors.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mist::rt {

/// The dtypes this runtime reads and writes (as raw bytes; F32 also as
/// floats): BOOL, U8, I8, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64.
/// Returns the element size in bytes, or 0 for any other name (dtype names
/// are case-sensitive, as in the format).
int dtypeSize(std::string_view dtype);

struct TensorData {
  std::string name;
  std::string dtype;          ///< "F32", "BF16", ...
  std::vector<int64_t> shape; ///< empty: a scalar (one element)
  std::vector<std::byte> bytes;
  bool loaded = true; ///< false: listed by a selective read, bytes not read

  /// An F32 tensor holding `values` (row-major; values.size() must match
  /// the shape for the writer to accept it).
  static TensorData fromFloats(std::string name, std::vector<int64_t> shape,
                               std::span<const float> values);
  /// The values of an F32 tensor; nullopt for another dtype or when the
  /// byte count is not a whole number of floats.
  std::optional<std::vector<float>> floats() const;
};

/// What a safetensors file holds.
struct SafetensorsFile {
  std::vector<TensorData> tensors; ///< sorted by name
  std::map<std::string, std::string> metadata;

  /// The tensor called `name`, or nullptr.
  const TensorData *find(std::string_view name) const;
};

/// Writes `tensors` and `metadata` to `path` atomically. Checks the tensors
/// first (unique names other than "__metadata__", valid UTF-8 in names and
/// metadata, known dtypes, non-negative dimensions, bytes == elements *
/// element size), so an invalid list fails before anything is written.
/// Returns the error, naming the file, or nullopt; on error `path` keeps its
/// old contents (or stays absent) and no temporary file is left.
std::optional<std::string>
writeSafetensors(const std::string &path, const std::vector<TensorData> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

/// Reads and checks all of `path`; nullopt with `error` (naming the file and
/// what is wrong) when anything is amiss. With `wanted`, only the tensors it
/// accepts are read: the others are listed (name, dtype, shape) with
/// `loaded` false and no bytes, so a rank reads its part of a large file.
std::optional<SafetensorsFile>
readSafetensors(const std::string &path, std::string &error,
                const std::function<bool(std::string_view name)> &wanted = {});

} // namespace mist::rt
