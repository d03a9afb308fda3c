//===- RopeEmbeddingKernelsTest.cu - CUDA rope and embeddings vs reference ===//
#include "GpuTest.h"

#include "stdlib/kernels/embedding/EmbeddingCuda.h"
#include "stdlib/kernels/rope/RopeCuda.h"

using namespace mist::gputest;
using namespace mist::kernels;

namespace {

/// Forward and inverse rotation, out of place and in place. An odd head
/// dimension leaves each head's last element alone: the prefilled outputs
/// must keep it on both sides.
void checkRope(Index batch, Index seq, Index heads, Index headDim, float theta, unsigned seed,
               Index rotaryDim = 0) {
  size_t n = size_t(batch * seq * heads * headDim);
  std::string shape = std::to_string(batch) + "x" + std::to_string(seq) + "x" +
                      std::to_string(heads) + "x" + std::to_string(headDim) +
                      (rotaryDim ? " rotary " + std::to_string(rotaryDim) : "");
  std::vector<float> inp = randomVector(n, seed);
  for (bool inverse : {false, true}) {
    std::string what = std::string(inverse ? "rope bwd " : "rope fwd ") + shape;
    std::vector<float> out = randomVector(n, seed + 1);
    DeviceBuffer<float> dInp(inp), dOut(out), dInPlace(inp);
    ropeRef({out.data(), inp.data(), batch, seq, heads, headDim, theta, inverse, rotaryDim});
    CHECK_CUDA(ropeCuda({dOut.ptr, dInp.ptr, batch, seq, heads, headDim, theta, inverse, rotaryDim},
                        nullptr));
    CHECK_CUDA(ropeCuda(
        {dInPlace.ptr, dInPlace.ptr, batch, seq, heads, headDim, theta, inverse, rotaryDim},
        nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    expectClose(what, dOut.download(), out, 1e-4f, 1e-5f);
    // In place: the reference's output with the odd tail still the input.
    std::vector<float> inPlace = inp;
    ropeRef(
        {inPlace.data(), inPlace.data(), batch, seq, heads, headDim, theta, inverse, rotaryDim});
    expectClose(what + " in place", dInPlace.download(), inPlace, 1e-4f, 1e-5f);
  }
  // The inverse undoes the rotation.
  DeviceBuffer<float> x(inp);
  CHECK_CUDA(
      ropeCuda({x.ptr, x.ptr, batch, seq, heads, headDim, theta, false, rotaryDim}, nullptr));
  CHECK_CUDA(ropeCuda({x.ptr, x.ptr, batch, seq, heads, headDim, theta, true, rotaryDim}, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose("rope bwd(fwd(x)) = x " + shape, x.download(), inp, 1e-4f, 1e-5f);
}

/// ids drawn from [0, 3 * vocab) against the slice [vocabStart, vocabStart +
/// vocab) with vocabStart = vocab: a third of the tokens fall in this
/// slice, many of them on the same row (atomics in backward).
void checkEmbedding(Index tokens, Index channels, Index vocab, unsigned seed) {
  size_t n = size_t(tokens * channels), t = size_t(vocab * channels);
  std::string what = "embedding " + std::to_string(tokens) + " tokens x " +
                     std::to_string(channels) + ", vocab " + std::to_string(vocab);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(3 * vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int32_t &id : ids)
    id = pick(gen);
  ids[0] = int32_t(vocab); // the first and the last row of the slice, and just outside
  if (tokens > 2) {
    ids[1] = int32_t(2 * vocab - 1);
    ids[2] = int32_t(2 * vocab);
  }
  std::vector<float> table = randomVector(t, seed + 1), dout = randomVector(n, seed + 2);
  std::vector<float> out = randomVector(n, seed + 3), dtable = randomVector(t, seed + 4);
  DeviceBuffer<int32_t> dIds(ids);
  DeviceBuffer<float> dTable(table), dDout(dout), dOut(out), dDtable(dtable);
  EmbeddingArgs host{out.data(), ids.data(), table.data(), dtable.data(), dout.data(),
                     tokens,     channels,   vocab,        vocab};
  EmbeddingArgs dev{dOut.ptr, dIds.ptr, dTable.ptr, dDtable.ptr, dDout.ptr,
                    tokens,   channels, vocab,      vocab};
  embeddingFwdRef(host);
  embeddingBwdRef(host);
  CHECK_CUDA(embeddingFwdCuda(dev, nullptr));
  CHECK_CUDA(embeddingBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " fwd", dOut.download(), out, 0.f, 0.f); // a copy: exact
  // Atomics add the repeated rows in another order than the reference.
  expectClose(what + " bwd (accumulated)", dDtable.download(), dtable, 1e-4f,
              1e-5f * tokens / vocab + 1e-5f);
}

void checkPositionEmbedding(Index batch, Index seq, Index channels, unsigned seed,
                            Index firstToken = 0) {
  size_t n = size_t(batch * seq * channels), t = size_t(seq * channels);
  std::string what = "position embedding " + std::to_string(batch) + "x" + std::to_string(seq) +
                     "x" + std::to_string(channels);
  std::vector<float> table = randomVector(t, seed), dout = randomVector(n, seed + 1);
  std::vector<float> out = randomVector(n, seed + 2), dtable = randomVector(t, seed + 3);
  DeviceBuffer<float> dTable(table), dDout(dout), dOut(out), dDtable(dtable);
  PositionEmbeddingArgs host{out.data(),  table.data(), dtable.data(), dout.data(),
                             batch * seq, seq,          channels,      firstToken};
  PositionEmbeddingArgs dev{dOut.ptr,    dTable.ptr, dDtable.ptr, dDout.ptr,
                            batch * seq, seq,        channels,    firstToken};
  positionEmbeddingFwdRef(host);
  positionEmbeddingBwdRef(host);
  CHECK_CUDA(positionEmbeddingFwdCuda(dev, nullptr));
  CHECK_CUDA(positionEmbeddingBwdCuda(dev, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  expectClose(what + " fwd", dOut.download(), out, 0.f, 0.f);
  // The same additions in the same order (row order) as the reference.
  expectClose(what + " bwd (accumulated)", dDtable.download(), dtable, 0.f, 0.f);
}

} // namespace

int main() {
  requireGpu();
  checkRope(2, 7, 3, 64, 10000.f, 1);
  checkRope(1, 1000, 2, 128, 10000.f, 11);
  checkRope(3, 33, 5, 32, 500000.f, 21);
  checkRope(1, 4, 2, 7, 10000.f, 31);     // odd head dimension
  checkRope(1, 4096, 1, 96, 10000.f, 41); // long sequence: large angles
  checkRope(2, 5, 4, 2, 10000.f, 51);
  checkRope(2, 9, 3, 64, 10000.f, 61, 16); // partial rotary (GPT-NeoX: a quarter of the head)
  checkRope(1, 6, 2, 10, 10000.f, 71, 4);

  checkEmbedding(1, 1, 1, 101);
  checkEmbedding(37, 33, 5, 111);
  checkEmbedding(1000, 64, 50, 121);
  checkEmbedding(2048, 768, 1000, 131);
  checkEmbedding(300, 1031, 7, 141);

  checkPositionEmbedding(1, 1, 1, 201);
  checkPositionEmbedding(3, 100, 64, 211);
  checkPositionEmbedding(4, 1024, 768, 221);
  checkPositionEmbedding(2, 17, 1031, 231);
  checkPositionEmbedding(3, 16, 64, 241, /*firstToken=*/40); // a sequence-parallel rank's rows

  if (ropeCuda(RopeArgs{nullptr, nullptr, 1, -1, 1, 8}, nullptr) != cudaErrorInvalidValue ||
      embeddingFwdCuda(EmbeddingArgs{nullptr, nullptr, nullptr, nullptr, nullptr, -1, 8, 8, 0},
                       nullptr) != cudaErrorInvalidValue) {
    std::printf("FAIL negative sizes are not refused\n");
    ++failures();
  }
  return finish();
}
