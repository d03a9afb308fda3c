//===- MpiCommunicator.cpp - Communicator over MPI, MPI lifetime, aborting ===//
#include "runtime/comm/MpiCommunicator.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>

#if defined(__SANITIZE_ADDRESS__)
#define MIST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MIST_ASAN 1
#endif
#endif

#ifdef MIST_ASAN
/// In a sanitized build (scripts/run-sanitized-tests.sh), programs that use
/// MPI record allocation stacks with the slow unwinder. Open MPI leaks at exit
/// by design, partly from components it dlcloses at MPI_Finalize and from its
/// progress thread: the fast (frame-pointer) unwinder stops in that code, so
/// the stack shows only unknown modules and no suppression can match it; the
/// slow one reaches libmpi, libopen-pal or libevent, which
/// scripts/lsan-suppressions.txt names. Only MPI programs pay for it.
extern "C" const char *__lsan_default_options() { return "fast_unwind_on_malloc=0"; }
#endif

namespace mist::rt {

namespace {

/// The world rank, remembered at MPI_Init so abortJob can name the rank even
/// after MPI_Finalize; -1 before MpiRuntime.
int worldRankForMessages = -1;

bool mpiIsLive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

/// Turns a failed MPI call into the end of the job, with MPI's own words.
void check(int rc, const char *call) {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  std::string what = MPI_Error_string(rc, text, &length) == MPI_SUCCESS
                         ? std::string(text, length)
                         : "MPI error code " + std::to_string(rc);
  abortJob(std::string(call) + " failed: " + what);
}

/// Calls `move(offset, count)` for consecutive pieces of [0, n) of at most
/// `chunk` elements; nothing when n is 0.
template <class Move> void inChunks(size_t n, size_t chunk, Move move) {
  for (size_t offset = 0; offset < n; offset += chunk)
    move(offset, static_cast<int>(std::min(chunk, n - offset)));
}

/// An uncaught exception on one rank would otherwise leave the others
/// waiting in their next collective.
[[noreturn]] void abortOnUncaughtException() {
  std::string why = "terminate called";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception &e) {
      why = std::string("uncaught exception: ") + e.what();
    } catch (...) {
      why = "uncaught exception";
    }
  }
  abortJob(why);
}

} // namespace

namespace {
void printFailure(const std::string &why) {
  std::string rank = worldRankForMessages >= 0 ? std::to_string(worldRankForMessages) : "?";
  std::fprintf(stderr, "mistrt: rank %s: %s\n", rank.c_str(), why.c_str());
  std::fflush(stderr);
}
} // namespace

[[noreturn]] void abortJob(const std::string &why) {
  printFailure(why);
  if (mpiIsLive())
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1); // not live, or MPI_Abort returned
}

[[noreturn]] void abortJobTogether(Communicator &group, const std::string &why) {
  // Every rank says it, so per-rank output files (srun -o %t) hold it too.
  if (group.rank() != 0) {
    printFailure(why);
    group.barrier(); // rank 0 never arrives: its MPI_Abort ends the wait
  }
  abortJob(why);
}

//===----------------------------------------------------------------------===//
// MpiRuntime
//===----------------------------------------------------------------------===//

MpiRuntime::MpiRuntime(int &argc, char **&argv) {
  int provided = 0;
  // A rank waiting in MPI polls; Open MPI's poll spins unless told to yield.
  // With --overlap a rank's threads share its core (compute beside the g2g
  // stream's collectives): a spinning g2g thread took the core from compute
  // and a collective finished only when both peers' g2g threads happened to
  // run at once (ZeRO-3's per-layer gathers made a dp-2 step 25-40% slower
  // than with its streams in turn). Yielding costs nothing where the rank's
  // thread is alone. A user's own setting wins (overwrite 0).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  // MPI_Init's errors are fatal under the default handler: it never returns one.
  // Multiple: with --overlap the g2g stream's thread calls MPI beside the
  // compute thread's tp collectives (mpiThreadsConcurrent says if granted).
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  threadMultiple = provided >= MPI_THREAD_MULTIPLE;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRankForMessages);
  // Errors not tied to a communicator are raised on MPI_COMM_WORLD (MPI 3)
  // or MPI_COMM_SELF (MPI 4): make both return, so check() reports them.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  if (provided < MPI_THREAD_FUNNELED)
    abortJob("MPI does not provide MPI_THREAD_FUNNELED");
  std::set_terminate(abortOnUncaughtException);
}

MpiRuntime::~MpiRuntime() {
  if (mpiIsLive())
    MPI_Finalize();
}

//===----------------------------------------------------------------------===//
// MpiCommunicator
//===----------------------------------------------------------------------===//

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned, size_t maxPerCall)
    : comm(comm), owned(owned), maxPerCall(maxPerCall) {
  check(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(comm, &myRank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &groupSize), "MPI_Comm_size");
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  if (!mpiIsLive())
    abortJob("MpiCommunicator::world() needs a live MpiRuntime");
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(MPI_COMM_WORLD, /*owned=*/false, defaultMaxElementsPerCall));
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize the communicator is gone with MPI; freeing it is an error.
  if (mpiIsLive())
    waitSends();
  if (owned && mpiIsLive())
    check(MPI_Comm_free(&comm), "MPI_Comm_free");
}

void MpiCommunicator::setMaxElementsPerCall(size_t n) {
  maxPerCall = std::clamp<size_t>(n, 1, INT_MAX);
}

namespace {

/// bf16 as MPI moves it: 2-byte elements, summed by bf16Sum.
MPI_Datatype mpiType(DType t) { return t == DType::BF16 ? MPI_UINT16_T : MPI_FLOAT; }

/// inout[i] = round(in[i] + inout[i]): one bf16 addition in fp32, rounded,
/// as every step of NCCL's bf16 sums. Exactly commutative, so the members of
/// an all-reduce, whatever its algorithm pairs, end with the same bits.
void bf16Sum(void *in, void *inout, int *count, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *count; ++i)
    b[i] = toBf16(fromBf16(a[i]) + fromBf16(b[i]));
}

/// MPI_SUM for fp32; the bf16 sum above for bf16 (created once, freed by MPI_Finalize).
MPI_Op sumOp(DType t) {
  if (t == DType::F32)
    return MPI_SUM;
  static MPI_Op op = [] {
    MPI_Op created;
    check(MPI_Op_create(bf16Sum, /*commute=*/1, &created), "MPI_Op_create");
    return created;
  }();
  return op;
}

} // namespace

void MpiCommunicator::allReduceSum(void *data, size_t n, DType type) {
  std::byte *at = static_cast<std::byte *>(data);
  const size_t width = bytesOf(type);
  // Element-wise, so each chunk is an independent all-reduce.
  inChunks(n, maxPerCall, [&](size_t offset, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, at + offset * width, count, mpiType(type), sumOp(type), comm),
          "MPI_Allreduce");
  });
}

void MpiCommunicator::allGather(const void *inData, void *outData, size_t nPerRank, DType type) {
  const std::byte *in = static_cast<const std::byte *>(inData);
  std::byte *out = static_cast<std::byte *>(outData);
  const size_t width = bytesOf(type);
  const MPI_Datatype element = mpiType(type);
  size_t ranks = static_cast<size_t>(groupSize);
  if (nPerRank <= maxPerCall / ranks) {
    int count = static_cast<int>(nPerRank);
    check(MPI_Allgather(in, count, element, out, count, element, comm), "MPI_Allgather");
    return;
  }
  // Gather the same slice of every member's block per call: a receive type of
  // `count` elements whose extent is a whole block drops member r's slice at
  // out + r * nPerRank + offset, with no staging copy.
  size_t chunk = std::max<size_t>(1, maxPerCall / ranks);
  inChunks(nPerRank, chunk, [&](size_t offset, int count) {
    MPI_Datatype slice, strided;
    check(MPI_Type_contiguous(count, element, &slice), "MPI_Type_contiguous");
    check(MPI_Type_create_resized(slice, 0, static_cast<MPI_Aint>(nPerRank * width), &strided),
          "MPI_Type_create_resized");
    check(MPI_Type_commit(&strided), "MPI_Type_commit");
    check(
        MPI_Allgather(in + offset * width, count, element, out + offset * width, 1, strided, comm),
        "MPI_Allgather");
    check(MPI_Type_free(&strided), "MPI_Type_free");
    check(MPI_Type_free(&slice), "MPI_Type_free");
  });
}

void MpiCommunicator::reduceScatterSum(const void *inData, void *outData, size_t nPerRank,
                                       DType type) {
  const std::byte *in = static_cast<const std::byte *>(inData);
  std::byte *out = static_cast<std::byte *>(outData);
  const size_t width = bytesOf(type);
  size_t ranks = static_cast<size_t>(groupSize);
  if (nPerRank <= maxPerCall / ranks) {
    check(MPI_Reduce_scatter_block(in, out, static_cast<int>(nPerRank), mpiType(type), sumOp(type),
                                   comm),
          "MPI_Reduce_scatter_block");
    return;
  }
  // MPI promises its predefined sums only on predefined types (no strided
  // trick as in allGather), so a huge reduce-scatter is one reduce per
  // member's block and chunk. Only reduce-scatters of more than
  // maxElementsPerCall in all come here, where the extra latency is noise.
  inChunks(nPerRank, maxPerCall, [&](size_t offset, int count) {
    for (int root = 0; root < groupSize; ++root)
      check(MPI_Reduce(in + (root * nPerRank + offset) * width,
                       root == myRank ? out + offset * width : nullptr, count, mpiType(type),
                       sumOp(type), root, comm),
            "MPI_Reduce");
  });
}

void MpiCommunicator::broadcast(void *data, size_t n, int root, DType type) {
  std::byte *at = static_cast<std::byte *>(data);
  inChunks(n, maxPerCall, [&](size_t offset, int count) {
    check(MPI_Bcast(at + offset * bytesOf(type), count, mpiType(type), root, comm), "MPI_Bcast");
  });
}

size_t MpiCommunicator::maxBytesPerCall() const {
  return std::min<size_t>(maxPerCall * sizeof(float), INT_MAX);
}

// send and recv cut the bytes the same way (both sides know the size), and
// MPI keeps messages of one sender and tag in order. A zero-byte message is
// still sent, so a send always pairs with a recv.
void MpiCommunicator::send(const void *data, size_t bytes, int peer, int tag) {
  const char *at = static_cast<const char *>(data);
  size_t chunk = maxBytesPerCall();
  size_t offset = 0;
  do {
    int count = static_cast<int>(std::min(chunk, bytes - offset));
    check(MPI_Send(at + offset, count, MPI_BYTE, peer, tag, comm), "MPI_Send");
    offset += count;
  } while (offset < bytes);
}

void MpiCommunicator::recv(void *data, size_t bytes, int peer, int tag) {
  char *at = static_cast<char *>(data);
  size_t chunk = maxBytesPerCall();
  size_t offset = 0;
  do {
    int count = static_cast<int>(std::min(chunk, bytes - offset));
    MPI_Status status;
    // A longer message fails here with MPI_ERR_TRUNCATE; a shorter one below.
    check(MPI_Recv(at + offset, count, MPI_BYTE, peer, tag, comm, &status), "MPI_Recv");
    int received = 0;
    check(MPI_Get_count(&status, MPI_BYTE, &received), "MPI_Get_count");
    if (received != count)
      abortJob("recv from rank " + std::to_string(peer) + " tag " + std::to_string(tag) +
               ": expected " + std::to_string(count) + " bytes, got " + std::to_string(received));
    offset += count;
  } while (offset < bytes);
}

void MpiCommunicator::postSend(const void *data, size_t bytes, int peer, int tag) {
  PendingSend &p = pending.emplace_back();
  p.bytes.assign(static_cast<const char *>(data), static_cast<const char *>(data) + bytes);
  size_t chunk = maxBytesPerCall();
  size_t offset = 0;
  do { // cut like send, so recv pairs with either
    int count = static_cast<int>(std::min(chunk, bytes - offset));
    MPI_Request &request = p.requests.emplace_back();
    check(MPI_Isend(p.bytes.data() + offset, count, MPI_BYTE, peer, tag, comm, &request),
          "MPI_Isend");
    offset += count;
  } while (offset < bytes);
}

void MpiCommunicator::waitSends() {
  for (PendingSend &p : pending)
    check(MPI_Waitall(static_cast<int>(p.requests.size()), p.requests.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
  pending.clear();
}

double MpiCommunicator::allReduceMax(double v) {
  double result = 0;
  check(MPI_Allreduce(&v, &result, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
  return result;
}

double MpiCommunicator::allReduceSumDouble(double v) {
  double result = 0;
  check(MPI_Allreduce(&v, &result, 1, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
  return result;
}

void MpiCommunicator::barrier() { check(MPI_Barrier(comm), "MPI_Barrier"); }

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  check(MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &part), "MPI_Comm_split");
  if (part == MPI_COMM_NULL)
    return nullptr;
  return std::unique_ptr<Communicator>(new MpiCommunicator(part, /*owned=*/true, maxPerCall));
}

std::vector<std::string> MpiCommunicator::allGatherText(const std::string &mine) {
  int length = int(std::min(mine.size(), size_t(1) << 20));
  std::vector<int> lengths(static_cast<size_t>(groupSize)), offsets(lengths.size());
  check(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm), "MPI_Allgather");
  int total = 0;
  for (int r = 0; r < groupSize; ++r) {
    offsets[size_t(r)] = total;
    total += lengths[size_t(r)];
  }
  std::string all(size_t(total), '\0');
  check(MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(),
                       MPI_CHAR, comm),
        "MPI_Allgatherv");
  std::vector<std::string> texts;
  for (int r = 0; r < groupSize; ++r)
    texts.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])));
  return texts;
}

std::string MpiCommunicator::hostName() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  check(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  return std::string(name, size_t(length));
}

int MpiCommunicator::localRank() const {
  MPI_Comm node = MPI_COMM_NULL;
  int local = 0;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, myRank, MPI_INFO_NULL, &node) !=
          MPI_SUCCESS ||
      MPI_Comm_rank(node, &local) != MPI_SUCCESS || MPI_Comm_free(&node) != MPI_SUCCESS)
    abortJob("cannot find the ranks of this node (MPI_Comm_split_type)");
  return local;
}

} // namespace mist::rt
