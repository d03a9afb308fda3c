//===- HuggingFaceLayoutTest.cpp - The export's transforms and their inverses ===//
/// The import (--from-hf) runs the export's (--emit=hf) transforms backwards:
/// each inverse must give back exactly what the transform took, for every
/// layout the three families use. (That the transforms themselves match
/// transformers is checked by transformers: tests/trainer/hf-export.sh and
/// hf-import.sh.)
#include "backend/exports/HuggingFaceLayout.h"

#include <gtest/gtest.h>
#include <numeric>

using namespace mist;
using namespace mist::hf;

namespace {

std::vector<float> counting(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

} // namespace

TEST(HuggingFaceLayout, UntransformedUndoesTransformed) {
  const int64_t rows = 8, cols = 12; // ours: [in, out]
  const std::vector<float> ours = counting(size_t(rows * cols));
  for (Transform how : {Transform::Copy, Transform::Transpose, Transform::TransposeRotaryRows}) {
    for (int64_t heads : {1, 3}) {
      HfTensor t;
      t.transform = how;
      t.heads = heads;
      const std::vector<float> theirs = transformed(ours, rows, cols, t);
      ASSERT_EQ(theirs.size(), ours.size());
      EXPECT_EQ(untransformed(theirs, rows, cols, t), ours)
          << "transform " << int(how) << ", heads " << heads;
      if (how != Transform::Copy) { // a real permutation, not the identity
        EXPECT_NE(theirs, ours);
      }
    }
  }
  // Llama's rotary rows: transformers' row j < d/2 of a head is our column
  // 2j, row j >= d/2 our column 2(j - d/2) + 1.
  HfTensor rope;
  rope.transform = Transform::TransposeRotaryRows;
  rope.heads = 3; // head size 4
  const std::vector<float> theirs = transformed(ours, rows, cols, rope);
  EXPECT_EQ(theirs[size_t(1 * rows + 0)], ours[size_t(0 * cols + 2)]); // row 1 <- column 2
  EXPECT_EQ(theirs[size_t(2 * rows + 0)], ours[size_t(0 * cols + 1)]); // row 2 <- column 1
}

TEST(HuggingFaceLayout, SplitQkvUndoesFusedQkv) {
  for (int64_t in : {1, 6}) { // biases, weights
    for (int64_t rotary : {0, 2, 4}) {
      HfTensor t;
      t.transform = Transform::FuseQkvPerHead;
      t.heads = 2;
      t.rotaryDim = rotary;
      const int64_t out = 8; // head size 4
      std::array<std::vector<float>, 3> parts;
      for (size_t k = 0; k < 3; ++k) {
        parts[k] = counting(size_t(in * out));
        for (float &v : parts[k])
          v += 1000.0f * float(k);
      }
      const std::vector<float> fused = fusedQkv(parts, in, out, t);
      ASSERT_EQ(fused.size(), size_t(3 * in * out));
      EXPECT_EQ(splitQkv(fused, in, out, t), parts) << "in " << in << ", rotary " << rotary;
    }
  }
}

TEST(HuggingFaceLayout, ValuesOfReadsHalfPrecision) {
  rt::TensorData half{"w", "F16", {4}, {}};
  // 1.0, -2.0, 65504 (the largest half), 2^-24 (the smallest subnormal).
  for (uint16_t bits : {uint16_t(0x3C00), uint16_t(0xC000), uint16_t(0x7BFF), uint16_t(0x0001)})
    for (int b = 0; b < 2; ++b)
      half.bytes.push_back(std::byte(bits >> (8 * b)));
  auto values = valuesOf(half);
  ASSERT_TRUE(values);
  EXPECT_EQ(*values, (std::vector<float>{1.0f, -2.0f, 65504.0f, 5.9604645e-8f}));
  rt::TensorData ints{"i", "I32", {1}, std::vector<std::byte>(4)};
  EXPECT_FALSE(valuesOf(ints));
}
