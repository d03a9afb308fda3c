//===- NcclCommunicator.cpp - Communicator over NCCL, on GPU buffers ------===//
#include "runtime/comm/NcclCommunicator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

// ncclGetLastError (2.13) and ncclInProgress (2.14).
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "NcclCommunicator needs NCCL 2.14 or later"
#endif

namespace mist::rt {

namespace {

/// Calls `move(offset, count)` for consecutive pieces of [0, n) of at most
/// `chunk` elements; nothing when n is 0.
template <class Move> void inChunks(size_t n, size_t chunk, Move move) {
  for (size_t offset = 0; offset < n; offset += chunk)
    move(offset, std::min(chunk, n - offset));
}

/// The CUDA checks that run before a communicator exists (no group rank).
void checkCudaEarly(cudaError_t rc, const char *call) {
  if (rc != cudaSuccess)
    abortJob(std::string(call) + " failed: " + cudaGetErrorString(rc));
}

} // namespace

//===----------------------------------------------------------------------===//
// Errors and the device
//===----------------------------------------------------------------------===//

void NcclCommunicator::fail(const char *call, const std::string &what) const {
  abortJob(std::string(call) + " failed on NCCL group rank " + std::to_string(myRank) + " of " +
           std::to_string(groupSize) + ": " + what);
}

void NcclCommunicator::checkNccl(ncclResult_t rc, const char *call) const {
  if (rc == ncclSuccess)
    return;
  std::string what = ncclGetErrorString(rc);
  // The last error names the cause (e.g. which peer or transport failed).
  if (const char *last = comm ? ncclGetLastError(comm) : nullptr; last && *last)
    what += std::string(" (") + last + ")";
  fail(call, what);
}

void NcclCommunicator::checkCuda(cudaError_t rc, const char *call) const {
  if (rc != cudaSuccess)
    fail(call, cudaGetErrorString(rc));
}

void NcclCommunicator::checkPeer(int peer, const char *call) const {
  if (peer < 0 || peer >= groupSize)
    fail(call, "peer " + std::to_string(peer) + " is not a rank of the group");
}

void NcclCommunicator::checkDeviceBuffer(const void *p, size_t bytes, const char *call) const {
  if (bytes == 0)
    return;
  cudaPointerAttributes attributes{};
  checkCuda(cudaPointerGetAttributes(&attributes, p), "cudaPointerGetAttributes");
  bool onDevice =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!onDevice)
    fail(call, "the buffer is not device memory (NcclCommunicator takes device pointers)");
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != cudaDevice)
    fail(call, "the buffer is on device " + std::to_string(attributes.device) +
                   ", the communicator on device " + std::to_string(cudaDevice));
}

class NcclCommunicator::OnDevice {
public:
  explicit OnDevice(const NcclCommunicator &c) : c(c) {
    c.checkCuda(cudaGetDevice(&saved), "cudaGetDevice");
    if (saved != c.cudaDevice)
      c.checkCuda(cudaSetDevice(c.cudaDevice), "cudaSetDevice");
  }
  ~OnDevice() {
    if (saved != c.cudaDevice)
      c.checkCuda(cudaSetDevice(saved), "cudaSetDevice");
  }
  OnDevice(const OnDevice &) = delete;
  OnDevice &operator=(const OnDevice &) = delete;

private:
  const NcclCommunicator &c;
  int saved = 0;
};

void NcclCommunicator::synchronize() {
  // cudaStreamSynchronize would wait for ever if a peer died or the network
  // failed; NCCL reports those through ncclCommGetAsyncError. Waiting for
  // workStream waits for everything this communicator issued, on any stream.
  orderAfterEarlierWork(workStream);
  for (;;) {
    cudaError_t state = cudaStreamQuery(workStream);
    if (state == cudaSuccess) {
      lastStream = nullptr; // nothing of ours is in flight

      return;
    }
    if (state != cudaErrorNotReady)
      checkCuda(state, "cudaStreamQuery");
    ncclResult_t async = ncclSuccess;
    checkNccl(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
    if (async != ncclSuccess && async != ncclInProgress)
      checkNccl(async, "NCCL operation (asynchronous error)");
    std::this_thread::yield();
  }
}

void NcclCommunicator::orderAfterEarlierWork(cudaStream_t s) {
  if (lastStream && lastStream != s)
    checkCuda(cudaStreamWaitEvent(s, lastIssued, 0), "cudaStreamWaitEvent");
}

void NcclCommunicator::noteIssued(cudaStream_t s) {
  checkCuda(cudaEventRecord(lastIssued, s), "cudaEventRecord");
  lastStream = s;
}

//===----------------------------------------------------------------------===//
// Creation and destruction
//===----------------------------------------------------------------------===//

int NcclCommunicator::selectLocalDevice(MpiCommunicator &world) {
  MPI_Comm node = MPI_COMM_NULL;
  int localRank = 0, localSize = 1;
  if (MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL,
                          &node) != MPI_SUCCESS ||
      MPI_Comm_rank(node, &localRank) != MPI_SUCCESS ||
      MPI_Comm_size(node, &localSize) != MPI_SUCCESS || MPI_Comm_free(&node) != MPI_SUCCESS)
    abortJob("selectLocalDevice: cannot find the ranks of this node (MPI_Comm_split_type)");
  int devices = 0;
  checkCudaEarly(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices < 1)
    abortJob("selectLocalDevice: no CUDA device");
  if (localSize > devices)
    abortJob("selectLocalDevice: " + std::to_string(localSize) + " ranks on this node but " +
             std::to_string(devices) + " GPUs; NCCL needs one GPU per rank");
  int device = localRank % devices;
  checkCudaEarly(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(MpiCommunicator &group) {
  // Our own duplicate of the group (color 0, ranks kept), so the caller may
  // destroy `group` and split() has an MPI group to split.
  std::unique_ptr<Communicator> copy = group.split(0, group.rank());
  auto *mpi = dynamic_cast<MpiCommunicator *>(copy.get());
  if (!mpi)
    abortJob("NcclCommunicator::create: MpiCommunicator::split returned no MpiCommunicator");
  copy.release();
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::unique_ptr<MpiCommunicator>(mpi), defaultMaxElementsPerCall));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<MpiCommunicator> bootstrapGroup,
                                   size_t maxPerCall)
    : bootstrap(std::move(bootstrapGroup)), myRank(bootstrap->rank()), groupSize(bootstrap->size()),
      maxPerCall(maxPerCall) {
  checkCuda(cudaGetDevice(&cudaDevice), "cudaGetDevice");
  ncclUniqueId id{};
  if (myRank == 0)
    checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  int rc = MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, bootstrap->handle());
  if (rc != MPI_SUCCESS)
    fail("MPI_Bcast of the ncclUniqueId", "MPI error code " + std::to_string(rc));
  checkNccl(ncclCommInitRank(&comm, groupSize, id, myRank), "ncclCommInitRank");
  checkCuda(cudaStreamCreateWithFlags(&workStream, cudaStreamDefault), "cudaStreamCreate");
  checkCuda(cudaEventCreateWithFlags(&lastIssued, cudaEventDisableTiming), "cudaEventCreate");
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&scratch), sizeof(double)), "cudaMalloc");
  checkCuda(cudaMallocHost(reinterpret_cast<void **>(&hostScalar), sizeof(double)),
            "cudaMallocHost");
}

NcclCommunicator::~NcclCommunicator() {
  OnDevice on(*this);
  waitSends(); // as MpiCommunicator: queued sends are delivered first
  checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
  comm = nullptr;
  // At process exit the CUDA runtime may already be unloading; nothing is
  // left to free then.
  auto release = [&](cudaError_t rc, const char *call) {
    if (rc != cudaErrorCudartUnloading)
      checkCuda(rc, call);
  };
  for (DeviceBuffer &b : sendBuffers)
    release(cudaFree(b.data), "cudaFree");
  release(cudaFree(scratch), "cudaFree");
  release(cudaFreeHost(hostScalar), "cudaFreeHost");
  release(cudaEventDestroy(lastIssued), "cudaEventDestroy");
  release(cudaStreamDestroy(workStream), "cudaStreamDestroy");
}

void NcclCommunicator::setMaxElementsPerCall(size_t n) { maxPerCall = std::max<size_t>(n, 1); }

size_t NcclCommunicator::maxBytesPerCall() const {
  // Saturates instead of overflowing for absurd limits.
  return maxPerCall > SIZE_MAX / sizeof(float) ? SIZE_MAX : maxPerCall * sizeof(float);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {
ncclDataType_t ncclType(DType t) { return t == DType::BF16 ? ncclBfloat16 : ncclFloat; }
} // namespace

void NcclCommunicator::allReduceSum(void *data, size_t n, DType type) {
  allReduceSumOn(workStream, data, n, type);
  synchronize();
}

void NcclCommunicator::allGather(const void *in, void *out, size_t nPerRank, DType type) {
  allGatherOn(workStream, in, out, nPerRank, type);
  synchronize();
}

void NcclCommunicator::reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) {
  reduceScatterSumOn(workStream, in, out, nPerRank, type);
  synchronize();
}

void NcclCommunicator::broadcast(void *data, size_t n, int root, DType type) {
  broadcastOn(workStream, data, n, root, type);
  synchronize();
}

void NcclCommunicator::allReduceSumOn(cudaStream_t stream, void *buffer, size_t n, DType type) {
  std::byte *data = static_cast<std::byte *>(buffer);
  const size_t width = bytesOf(type);
  OnDevice on(*this);
  checkDeviceBuffer(data, n * width, "allReduceSum");
  flushQueuedSends();
  orderAfterEarlierWork(stream);
  inChunks(n, maxPerCall, [&](size_t offset, size_t count) {
    checkNccl(ncclAllReduce(data + offset * width, data + offset * width, count, ncclType(type),
                            ncclSum, comm, stream),
              "ncclAllReduce");
  });
  noteIssued(stream);
}

void NcclCommunicator::allGatherOn(cudaStream_t stream, const void *inData, void *outData,
                                   size_t nPerRank, DType type) {
  const std::byte *in = static_cast<const std::byte *>(inData);
  std::byte *out = static_cast<std::byte *>(outData);
  const size_t width = bytesOf(type);
  OnDevice on(*this);
  checkDeviceBuffer(in, nPerRank * width, "allGather");
  checkDeviceBuffer(out, nPerRank * width, "allGather");
  flushQueuedSends();
  orderAfterEarlierWork(stream);
  size_t ranks = static_cast<size_t>(groupSize);
  if (nPerRank <= maxPerCall / ranks) {
    if (nPerRank > 0)
      checkNccl(ncclAllGather(in, out, nPerRank, ncclType(type), comm, stream), "ncclAllGather");
    noteIssued(stream);
    return;
  }
  // NCCL has no strided receive type; instead each chunk is one group of
  // broadcasts, member r's slice rooted at r and landing in place at
  // out + r * nPerRank + offset, with no staging copy.
  size_t chunk = std::max<size_t>(1, maxPerCall / ranks);
  inChunks(nPerRank, chunk, [&](size_t offset, size_t count) {
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    for (int root = 0; root < groupSize; ++root)
      checkNccl(ncclBroadcast(in + offset * width, out + (root * nPerRank + offset) * width, count,
                              ncclType(type), root, comm, stream),
                "ncclBroadcast");
    checkNccl(ncclGroupEnd(), "ncclGroupEnd (all-gather)");
  });
  noteIssued(stream);
}

void NcclCommunicator::reduceScatterSumOn(cudaStream_t stream, const void *inData, void *outData,
                                          size_t nPerRank, DType type) {
  const std::byte *in = static_cast<const std::byte *>(inData);
  std::byte *out = static_cast<std::byte *>(outData);
  const size_t width = bytesOf(type);
  OnDevice on(*this);
  checkDeviceBuffer(in, nPerRank * width, "reduceScatterSum");
  checkDeviceBuffer(out, nPerRank * width, "reduceScatterSum");
  flushQueuedSends();
  orderAfterEarlierWork(stream);
  size_t ranks = static_cast<size_t>(groupSize);
  if (nPerRank <= maxPerCall / ranks) {
    if (nPerRank > 0)
      checkNccl(ncclReduceScatter(in, out, nPerRank, ncclType(type), ncclSum, comm, stream),
                "ncclReduceScatter");
    noteIssued(stream);
    return;
  }
  // As in the MPI backend, a huge reduce-scatter is one reduce per member's
  // block and chunk; here each chunk's reduces form one group. `out` is only
  // written on the root.
  size_t chunk = std::max<size_t>(1, maxPerCall / ranks);
  inChunks(nPerRank, chunk, [&](size_t offset, size_t count) {
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    for (int root = 0; root < groupSize; ++root)
      checkNccl(ncclReduce(in + (root * nPerRank + offset) * width, out + offset * width, count,
                           ncclType(type), ncclSum, root, comm, stream),
                "ncclReduce");
    checkNccl(ncclGroupEnd(), "ncclGroupEnd (reduce-scatter)");
  });
  noteIssued(stream);
}

void NcclCommunicator::broadcastOn(cudaStream_t stream, void *buffer, size_t n, int root,
                                   DType type) {
  std::byte *data = static_cast<std::byte *>(buffer);
  const size_t width = bytesOf(type);
  OnDevice on(*this);
  checkDeviceBuffer(data, n * width, "broadcast");
  flushQueuedSends();
  orderAfterEarlierWork(stream);
  inChunks(n, maxPerCall, [&](size_t offset, size_t count) {
    checkNccl(ncclBroadcast(data + offset * width, data + offset * width, count, ncclType(type),
                            root, comm, stream),
              "ncclBroadcast");
  });
  noteIssued(stream);
}

double NcclCommunicator::allReduceScalar(double v, ncclRedOp_t op, const char *call) {
  OnDevice on(*this);
  flushQueuedSends();
  orderAfterEarlierWork(workStream);
  *hostScalar = v; // no copy of the previous call is in flight: it synchronized
  checkCuda(cudaMemcpyAsync(scratch, hostScalar, sizeof v, cudaMemcpyHostToDevice, workStream),
            "cudaMemcpyAsync");
  checkNccl(ncclAllReduce(scratch, scratch, 1, ncclDouble, op, comm, workStream), call);
  checkCuda(cudaMemcpyAsync(hostScalar, scratch, sizeof v, cudaMemcpyDeviceToHost, workStream),
            "cudaMemcpyAsync");
  synchronize(); // polls NCCL's asynchronous errors while it waits
  return *hostScalar;
}

double NcclCommunicator::allReduceMax(double v) {
  return allReduceScalar(v, ncclMax, "ncclAllReduce (max)");
}

double NcclCommunicator::allReduceSumDouble(double v) {
  return allReduceScalar(v, ncclSum, "ncclAllReduce (sum)");
}

void NcclCommunicator::barrier() {
  // An all-reduce of one element completes on no member before every member
  // has joined it. The scratch value is irrelevant.
  OnDevice on(*this);
  flushQueuedSends();
  orderAfterEarlierWork(workStream);
  checkNccl(ncclAllReduce(scratch, scratch, 1, ncclDouble, ncclSum, comm, workStream),
            "ncclAllReduce (barrier)");
  synchronize();
}

//===----------------------------------------------------------------------===//
// Point-to-point
//===----------------------------------------------------------------------===//

// Both sides cut the bytes the same way, and NCCL delivers the calls between
// one pair in issue order, so a send pairs with a recv of the same size.
void NcclCommunicator::issueSend(const void *at, size_t bytes, int peer) {
  const char *base = static_cast<const char *>(at);
  inChunks(bytes, maxBytesPerCall(), [&](size_t offset, size_t count) {
    checkNccl(ncclSend(base + offset, count, ncclChar, peer, comm, workStream), "ncclSend");
  });
}

void NcclCommunicator::issueRecv(void *at, size_t bytes, int peer) {
  char *base = static_cast<char *>(at);
  inChunks(bytes, maxBytesPerCall(), [&](size_t offset, size_t count) {
    checkNccl(ncclRecv(base + offset, count, ncclChar, peer, comm, workStream), "ncclRecv");
  });
}

void NcclCommunicator::issueQueuedSends() {
  for (size_t i = 0; i < queued.size(); ++i)
    issueSend(sendBuffers[i].data, queued[i].bytes, queued[i].peer);
}

void NcclCommunicator::flushQueuedSends() {
  if (queued.empty())
    return;
  orderAfterEarlierWork(workStream);
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  issueQueuedSends();
  checkNccl(ncclGroupEnd(), "ncclGroupEnd (queued sends)");
  noteIssued(workStream);
  // The caller synchronizes; the buffers are free again once it has.
  queued.clear();
}

void NcclCommunicator::send(const void *data, size_t bytes, int peer, int /*tag*/) {
  checkPeer(peer, "send");
  OnDevice on(*this);
  checkDeviceBuffer(data, bytes, "send");
  orderAfterEarlierWork(workStream);
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  issueQueuedSends();
  issueSend(data, bytes, peer);
  checkNccl(ncclGroupEnd(), "ncclGroupEnd (send)");
  synchronize();
  queued.clear();
}

void NcclCommunicator::recv(void *data, size_t bytes, int peer, int /*tag*/) {
  checkPeer(peer, "recv");
  OnDevice on(*this);
  checkDeviceBuffer(data, bytes, "recv");
  // The queued sends progress together with this recv: two neighbours that
  // postSend to each other and then recv from each other do not deadlock.
  orderAfterEarlierWork(workStream);
  checkNccl(ncclGroupStart(), "ncclGroupStart");
  issueQueuedSends();
  issueRecv(data, bytes, peer);
  checkNccl(ncclGroupEnd(), "ncclGroupEnd (recv)");
  synchronize();
  queued.clear();
}

void NcclCommunicator::postSend(const void *data, size_t bytes, int peer, int /*tag*/) {
  checkPeer(peer, "postSend");
  OnDevice on(*this);
  checkDeviceBuffer(data, bytes, "postSend");
  size_t index = queued.size();
  if (sendBuffers.size() <= index)
    sendBuffers.resize(index + 1);
  DeviceBuffer &buffer = sendBuffers[index];
  if (buffer.capacity < bytes) {
    // Nothing queued uses this buffer; a flushed send that may still read it
    // is ordered before cudaFree, which waits for the device.
    checkCuda(cudaFree(buffer.data), "cudaFree");
    buffer = {};
    checkCuda(cudaMalloc(&buffer.data, bytes), "cudaMalloc");
    buffer.capacity = bytes;
  }
  if (bytes > 0)
    checkCuda(cudaMemcpyAsync(buffer.data, data, bytes, cudaMemcpyDeviceToDevice, workStream),
              "cudaMemcpyAsync");
  // Only the copy is on the stream: the caller may reuse `data` on return.
  synchronize();
  queued.push_back({bytes, peer});
}

void NcclCommunicator::waitSends() {
  OnDevice on(*this);
  flushQueuedSends();
  synchronize();
}

//===----------------------------------------------------------------------===//
// Split
//===----------------------------------------------------------------------===//

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  OnDevice on(*this);
  flushQueuedSends();
  synchronize();
  // Collective over the whole group, negative colors included.
  std::unique_ptr<Communicator> part = bootstrap->split(color, key);
  if (!part)
    return nullptr;
  auto *mpi = dynamic_cast<MpiCommunicator *>(part.get());
  if (!mpi)
    fail("split", "MpiCommunicator::split returned no MpiCommunicator");
  part.release();
  // Collective over the part: the members of one color bootstrap together.
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::unique_ptr<MpiCommunicator>(mpi), maxPerCall));
}

} // namespace mist::rt
