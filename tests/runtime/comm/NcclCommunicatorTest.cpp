//===- NcclCommunicatorTest.cpp - NcclCommunicator on GPU ranks ----------===//
/// \file
/// Runs under `mpirun -n N` (any N >= 1, one GPU per rank): every
/// collective, p2p, postSend/waitSends and split of NcclCommunicator on
/// device buffers, compared with values computed on the host. The inputs are
/// small integers and halves, so every sum is exact in any order and the
/// expected values are exact; the all-reduce of random data is compared bit
/// for bit across ranks. CTest runs it with -n 1 (label gpu); on a host with
/// several GPUs, -n 2 or more also exercises the traffic between GPUs:
///
///   mpirun -n 2 build/tests/runtime/comm/mistrtNcclCommunicatorTest
///
/// Exit status: 0 when every check passes on every rank, 1 when one fails,
/// 77 (CTest's SKIP_RETURN_CODE) when a rank has no usable GPU.
//===----------------------------------------------------------------------===//
#include "runtime/comm/NcclCommunicator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cuda_runtime_api.h>
#include <random>
#include <string>
#include <vector>

using namespace mist::rt;

namespace {

int checks = 0, failures = 0;
int worldRank = 0;

void expect(bool ok, const std::string &what) {
  ++checks;
  if (ok)
    return;
  ++failures;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", worldRank, what.c_str());
}

void cudaOk(cudaError_t rc, const char *call) {
  if (rc != cudaSuccess)
    abortJob(std::string("test: ") + call + " failed: " + cudaGetErrorString(rc));
}

/// A device copy of a host vector of T, freed with the object.
template <class T> class Device {
public:
  explicit Device(size_t n) : n(n) {
    // At least one element, so even empty buffers are valid device pointers.
    cudaOk(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
    cudaOk(cudaMemset(ptr, 0xff, std::max<size_t>(n, 1) * sizeof(T)), "cudaMemset");
  }
  explicit Device(const std::vector<T> &host) : Device(host.size()) { upload(host); }
  ~Device() { cudaFree(ptr); }
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  T *get() { return ptr; }
  void upload(const std::vector<T> &host) {
    if (!host.empty())
      cudaOk(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
             "cudaMemcpy");
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    if (n)
      cudaOk(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
  }

private:
  T *ptr = nullptr;
  size_t n;
};

/// How many elements differ from `expected(i)`.
template <class Expected> size_t mismatches(const std::vector<float> &v, Expected expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i)
    wrong += v[i] != expected(i);
  return wrong;
}

/// Rank r's value at i: small integers and halves, exact under any sum.
float valueOf(int r, size_t i) { return float(r + 1) + float(i % 13) * 0.5f; }
/// The sum of valueOf over `ranks` ranks.
float sumOf(int ranks, size_t i) {
  return float(ranks * (ranks + 1) / 2) + float(ranks) * float(i % 13) * 0.5f;
}

const std::vector<size_t> sizes{0, 1, 5, 37, 1009};

std::string trace(const char *what, size_t limit, size_t n) {
  return std::string(what) + ", chunk limit " + std::to_string(limit) + ", n " + std::to_string(n);
}

void testCollectives(NcclCommunicator &comm) {
  int r = comm.rank(), p = comm.size();
  size_t saved = comm.maxElementsPerCall();
  for (size_t limit : {saved, size_t(3), size_t(7), size_t(64)}) {
    comm.setMaxElementsPerCall(limit);
    std::vector<size_t> ns = sizes;
    if (limit == saved)
      ns.push_back(1000003);
    for (size_t n : ns) {
      // allReduceSum
      std::vector<float> host(n);
      for (size_t i = 0; i < n; ++i)
        host[i] = valueOf(r, i);
      Device<float> data(host);
      comm.allReduceSum(data.get(), n);
      expect(mismatches(data.download(), [&](size_t i) { return sumOf(p, i); }) == 0,
             trace("allReduceSum", limit, n));

      // allGather: member q's block holds q's values.
      Device<float> in(host), out(n * p);
      comm.allGather(in.get(), out.get(), n);
      expect(mismatches(out.download(), [&](size_t i) { return valueOf(int(i / n), i % n); }) == 0,
             trace("allGather", limit, n));

      // reduceScatterSum: block q of member m holds valueOf(m, q * n + i);
      // this rank receives the sum of its block.
      std::vector<float> blocks(n * p);
      for (size_t i = 0; i < blocks.size(); ++i)
        blocks[i] = valueOf(r, i);
      Device<float> scatterIn(blocks), scatterOut(n);
      comm.reduceScatterSum(scatterIn.get(), scatterOut.get(), n);
      expect(mismatches(scatterOut.download(), [&](size_t i) { return sumOf(p, r * n + i); }) == 0,
             trace("reduceScatterSum", limit, n));

      // broadcast from every root in turn.
      for (int root = 0; root < p; ++root) {
        Device<float> b(host);
        comm.broadcast(b.get(), n, root);
        expect(mismatches(b.download(), [&](size_t i) { return valueOf(root, i); }) == 0,
               trace(("broadcast from " + std::to_string(root)).c_str(), limit, n));
      }
    }
  }
  comm.setMaxElementsPerCall(saved);

  // Scalars and the barrier.
  expect(comm.allReduceMax(double(r) * 1.5) == double(p - 1) * 1.5, "allReduceMax");
  expect(comm.allReduceSumDouble(double(r) + 0.25) == double(p * (p - 1) / 2) + 0.25 * p,
         "allReduceSumDouble");
  comm.barrier();
}

/// The all-reduce of random data over six orders of magnitude gives the
/// same bits on every member (compared over MPI).
void testBitwiseIdentical(NcclCommunicator &comm, MpiCommunicator &mpi) {
  std::mt19937 random(1234 + comm.rank());
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-3, 3);
  const size_t n = 100003;
  std::vector<float> host(n);
  for (float &x : host)
    x = mantissa(random) * std::pow(10.f, float(exponent(random)));
  Device<float> data(host);
  comm.allReduceSum(data.get(), n);
  std::vector<float> mine = data.download(), rootCopy = mine;
  mpi.broadcast(rootCopy.data(), n, 0); // MPI moves the bits unchanged
  expect(std::memcmp(mine.data(), rootCopy.data(), n * sizeof(float)) == 0,
         "allReduceSum of random data is bitwise identical to rank 0's");
}

std::vector<char> pattern(size_t bytes, int from, int salt) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = char((i * 31 + size_t(from) * 7 + size_t(salt)) & 0xff);
  return v;
}

void expectBytes(Device<char> &got, const std::vector<char> &want, const std::string &what) {
  std::vector<char> host = got.download();
  expect(host.size() == want.size() && std::memcmp(host.data(), want.data(), want.size()) == 0,
         what);
}

void testPointToPoint(NcclCommunicator &comm) {
  int r = comm.rank(), p = comm.size();
  // Bigger than NCCL's p2p buffers (4 MiB by default), so a send cannot
  // complete before its recv is posted.
  const size_t big = (size_t(16) << 20) + 3;
  size_t saved = comm.maxElementsPerCall();

  // Facing postSends, then recvs: the 1F1B exchange that two blocking sends
  // would deadlock. With one rank the peer is this rank itself.
  int right = (r + 1) % p, left = (r + p - 1) % p;
  for (size_t limit : {saved, size_t(1) << 20}) { // unchunked, and 4 MiB chunks
    comm.setMaxElementsPerCall(limit);
    Device<char> out(pattern(big, r, 1)), in(big);
    comm.postSend(out.get(), big, right, 0);
    out.upload(pattern(big, r, 99)); // postSend copied: reuse at once
    comm.recv(in.get(), big, left, 0);
    comm.waitSends();
    expectBytes(in, pattern(big, left, 1),
                "postSend to the right, recv from the left, chunk limit " + std::to_string(limit));
  }
  comm.setMaxElementsPerCall(saved);

  // Zero bytes move nothing and pair up.
  {
    Device<char> none(0);
    comm.postSend(none.get(), 0, right, 0);
    comm.recv(none.get(), 0, left, 0);
    comm.waitSends();
    expect(true, "zero-byte postSend/recv return");
  }

  if (p == 1)
    return; // the rest needs distinct ranks (a lone send to oneself never completes)

  // Pairs (0, 1), (2, 3), ...; a last odd rank out only joins the collectives.
  int partner = r % 2 == 0 ? r + 1 : r - 1;
  bool paired = partner < p;
  bool even = r % 2 == 0;

  // Blocking: the even rank sends first.
  if (paired) {
    Device<char> out(pattern(big, r, 5)), in(big);
    if (even) {
      comm.send(out.get(), big, partner, 7);
      comm.recv(in.get(), big, partner, 7);
    } else {
      comm.recv(in.get(), big, partner, 7);
      comm.send(out.get(), big, partner, 7);
    }
    expectBytes(in, pattern(big, partner, 5), "blocking send/recv between a pair");
  }

  // Order: two postSends and a blocking send (which issues them) arrive in
  // issue order; then the other way, issued by waitSends. Chunked too
  // (limit 3 floats = 12 bytes).
  for (size_t limit : {saved, size_t(3)}) {
    comm.setMaxElementsPerCall(limit);
    std::string at = " (chunk limit " + std::to_string(limit) + ")";
    for (int round = 0; round < 2 && paired; ++round) {
      bool sender = even == (round == 0);
      int from = sender ? r : partner;
      Device<char> a(pattern(1001, from, 2)), b(pattern(big, from, 3)), c(pattern(4099, from, 4));
      if (sender) {
        comm.postSend(a.get(), 1001, partner, 0);
        comm.postSend(b.get(), big, partner, 0);
        if (round == 0) {
          comm.send(c.get(), 4099, partner, 0);
        } else {
          comm.postSend(c.get(), 4099, partner, 0);
          comm.waitSends();
        }
      } else {
        Device<char> ga(1001), gb(big), gc(4099);
        comm.recv(ga.get(), 1001, partner, 0);
        comm.recv(gb.get(), big, partner, 0);
        comm.recv(gc.get(), 4099, partner, 0);
        std::string how = round == 0 ? " (issued by send)" : " (issued by waitSends)";
        expectBytes(ga, pattern(1001, from, 2), "first message in order" + how + at);
        expectBytes(gb, pattern(big, from, 3), "second message in order" + how + at);
        expectBytes(gc, pattern(4099, from, 4), "third message in order" + how + at);
      }
    }
  }
  comm.setMaxElementsPerCall(saved);

  // A queued send is issued before a collective: the receiver receives,
  // then joins the barrier.
  if (paired) {
    Device<char> out(pattern(big, r, 6)), in(big);
    if (even) {
      comm.postSend(out.get(), big, partner, 0);
    } else {
      comm.recv(in.get(), big, partner, 0);
      expectBytes(in, pattern(big, partner, 6), "queued send issued by a collective");
    }
  }
  comm.barrier();
  comm.waitSends(); // nothing left
}

void testSplit(NcclCommunicator &comm) {
  int r = comm.rank(), p = comm.size();
  // Two colors by parity, ranked in reverse.
  std::unique_ptr<Communicator> part = comm.split(r % 2, p - r);
  int members = (p - r % 2 + 1) / 2; // ranks with this parity
  expect(part && part->size() == members, "split: size of the parity group");
  if (part) {
    int above = 0; // members of my parity with a larger rank come first
    for (int q = r + 2; q < p; q += 2)
      ++above;
    expect(part->rank() == above, "split: rank ordered by key");
    std::vector<float> host{float(r), 1.f};
    Device<float> data(host);
    part->allReduceSum(static_cast<float *>(data.get()), 2);
    float sum = 0;
    for (int q = r % 2; q < p; q += 2)
      sum += float(q);
    std::vector<float> got = data.download();
    expect(got[0] == sum && got[1] == float(members), "split: all-reduce over the parity group");
  }
  // Rank 0 opts out; the others form one group.
  std::unique_ptr<Communicator> rest = comm.split(r == 0 ? -1 : 0, r);
  expect((r == 0) == (rest == nullptr), "split: a negative color gets nullptr");
  if (rest) {
    expect(rest->size() == p - 1 && rest->rank() == r - 1, "split: the rest");
    expect(rest->allReduceSumDouble(1.0) == double(p - 1), "split: the rest all-reduces");
  }
}

} // namespace

int main(int argc, char **argv) {
  MpiRuntime mpiRuntime(argc, argv);
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  worldRank = world->rank();

  // Skip (77) unless every rank sees a GPU, decided together so that all
  // ranks skip or none does.
  int devices = 0;
  cudaError_t rc = cudaGetDeviceCount(&devices);
  double usable = rc == cudaSuccess && devices > 0 ? 1 : 0;
  if (world->allReduceMax(usable == 0 ? 1 : 0) != 0) {
    if (worldRank == 0)
      std::printf("no GPU (%s); skipped\n",
                  rc == cudaSuccess ? "no device" : cudaGetErrorString(rc));
    return 77;
  }

  NcclCommunicator::selectLocalDevice(*world);
  std::unique_ptr<NcclCommunicator> comm = NcclCommunicator::create(*world);
  expect(comm->size() == world->size() && comm->rank() == world->rank(), "same ranks as MPI");

  testCollectives(*comm);
  testBitwiseIdentical(*comm, *world);
  testPointToPoint(*comm);
  testSplit(*comm);

  int failed = world->allReduceMax(failures) > 0;
  std::printf("NcclCommunicatorTest rank %d/%d: %d checks, %d failed\n", worldRank, world->size(),
              checks, failures);
  comm.reset(); // before MPI_Finalize (its MPI duplicate needs MPI)
  return failed ? 1 : 0;
}
