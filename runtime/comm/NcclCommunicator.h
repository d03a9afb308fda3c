//===- NcclCommunicator.h - Communicator over NCCL, on GPU buffers -------===//
/// \file
/// The NCCL implementation of Communicator, for ranks that each drive one
/// GPU. Built as its own library, mistrtCommNccl, only where CUDA and NCCL
/// are found (runtime/comm/CMakeLists.txt); mistrtComm never needs them.
///
/// Buffers: every float buffer of the collectives and every send/recv
/// buffer is a DEVICE pointer on this communicator's GPU (memory from
/// cudaMalloc, or managed memory); every call checks that its non-empty
/// buffers are (cudaPointerGetAttributes) and aborts the job on a host
/// pointer or another GPU's memory. The scalar calls (allReduceMax,
/// allReduceSumDouble) take and return host doubles.
///
/// Device: the CUDA device current when the communicator is created (see
/// selectLocalDevice) is its device for good; every call makes it current
/// for its own duration and restores the caller's device afterwards.
///
/// Streams: the communicator owns one CUDA stream (a blocking stream, so it
/// is ordered with work on the legacy default stream). The Communicator
/// calls issue their work on it and synchronize it before they return, so
/// they honour Communicator's blocking contract: the outputs are ready for
/// any stream, and the inputs may be reused, when the call returns. Inputs
/// written by kernels on another non-default stream must be complete
/// (synchronized by the caller) before the call. The `...On(stream, ...)`
/// collectives are the stream-ordered ones a GPU trainer uses: enqueued on
/// the caller's stream behind its earlier work, returning at once, their
/// outputs ready in that stream's order (other streams wait for an event),
/// as a kernel's are. Every operation of the communicator, on whatever
/// stream, runs after the ones issued before it (an event joins the
/// streams), so the members' NCCL calls meet in program order; a blocking
/// call waits for all of them. Asynchronous NCCL errors of stream-ordered
/// work surface at the next blocking call (the trainer makes one per step).
///
/// Bootstrap: NCCL needs one ncclUniqueId shared by the group; rank 0
/// creates it and MPI_Bcast sends it over an MpiCommunicator of the same
/// group, then every member calls ncclCommInitRank. The communicator keeps
/// that MpiCommunicator (its own duplicate) for split().
///
/// Point-to-point: NCCL has no tags; `tag` is ignored. Messages between two
/// ranks arrive in the order they were issued, which is what the contract
/// asks for as the trainer uses it (the same tag on a pair, or tags used in
/// the same order on both sides); tags are checked only by the MPI backend.
/// NCCL cannot detect a recv whose size differs from the send's (the MPI
/// backend aborts; here the result is undefined and may hang): debug such
/// bugs on the MPI backend. A zero-byte send/recv moves nothing on either
/// side.
///
/// postSend copies the bytes to a device buffer the communicator owns
/// (cudaMemcpyAsync, synchronized before postSend returns, so the caller may
/// reuse `data` at once) and queues the send. NCCL runs the kernels of one
/// communicator one after another, and an ncclSend kernel may wait for the
/// peer's ncclRecv, so a send issued alone in front of a recv would deadlock
/// two neighbours that send to each other (the 1F1B case). Queued sends are
/// therefore issued by this communicator's next call: in one
/// ncclGroupStart/End with that call's own send or recv, so that they
/// progress together (NCCL's sendrecv pattern); in a group of their own just
/// before a collective or split; or by waitSends. That call returns only once
/// they are delivered. So, unlike MPI_Isend, a queued send needs its receiver
/// to post the matching recv without first waiting for this rank: fine for
/// the 1F1B exchange (both neighbours postSend, then recv) and for a
/// receiver that only receives; not for two ranks that each queue several
/// messages to the other and then receive them one recv at a time (only
/// NCCL's internal buffering, a few MiB, would let that complete).
///
/// Results: NCCL's all-reduce computes each element's sum once and copies
/// it (ring) or reduces up and broadcasts down (tree, NVLS), so results are
/// identical on every member; NCCL picks the algorithm from sizes and
/// topology, so a run is reproducible on the same machine and NCCL version.
/// Chunking (maxElementsPerCall) cuts at fixed offsets, as in the MPI
/// backend. None of this has been measured on a GPU yet
/// (tests/runtime/comm/NcclCommunicatorTest.cpp checks it where one exists).
///
/// Errors: every NCCL and CUDA return code is checked; a failure becomes
/// abortJob with the group rank, the call and NCCL's or CUDA's error string.
/// Waiting for the stream polls ncclCommGetAsyncError, so a failure of a
/// peer or of the network ends the job instead of hanging it.
///
/// Threads: as for MpiCommunicator, only the thread that created MpiRuntime
/// may call it.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/MpiCommunicator.h"

#include <cuda_runtime_api.h>
#include <memory>
#include <nccl.h>
#include <vector>

namespace mist::rt {

class NcclCommunicator final : public Communicator {
public:
  /// Collective over `group`: every member calls it, each with its own GPU
  /// current (one GPU per rank; NCCL refuses two members on one GPU). The
  /// result talks to the same ranks, with the same rank numbers, and is
  /// independent of `group`'s lifetime (it keeps a duplicate of it).
  static std::unique_ptr<NcclCommunicator> create(MpiCommunicator &group);

  /// Makes device `localRank % deviceCount` current, where localRank is this
  /// process's rank among the ranks of `world` on its node, and returns it.
  /// Collective over `world`. Aborts when there is no GPU or when a node
  /// has more ranks than GPUs. Call it once, before create().
  static int selectLocalDevice(MpiCommunicator &world);

  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return myRank; }
  int size() const override { return groupSize; }
  using Communicator::allGather;
  using Communicator::allReduceSum;
  using Communicator::broadcast;
  using Communicator::reduceScatterSum;
  void allReduceSum(void *data, size_t n, DType type) override;
  void allGather(const void *in, void *out, size_t nPerRank, DType type) override;
  void reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) override;
  void broadcast(void *data, size_t n, int root, DType type) override;
  void send(const void *data, size_t bytes, int peer, int tag) override;
  void recv(void *data, size_t bytes, int peer, int tag) override;
  void postSend(const void *data, size_t bytes, int peer, int tag) override;
  void waitSends() override;
  double allReduceMax(double v) override;
  double allReduceSumDouble(double v) override;
  void barrier() override;
  /// Splits the MPI group, then bootstraps a NCCL communicator on each part
  /// (on the same device). Members passing a negative color get nullptr
  /// but still take part in the MPI split.
  std::unique_ptr<Communicator> split(int color, int key) override;

  /// Stream-ordered collectives (see Streams above): the blocking calls'
  /// semantics, enqueued on `stream` and not waited for.
  void allReduceSumOn(cudaStream_t stream, void *data, size_t n, DType type);
  void allGatherOn(cudaStream_t stream, const void *in, void *out, size_t nPerRank, DType type);
  void reduceScatterSumOn(cudaStream_t stream, const void *in, void *out, size_t nPerRank,
                          DType type);
  void broadcastOn(cudaStream_t stream, void *data, size_t n, int root, DType type);

  int device() const { return cudaDevice; }
  cudaStream_t stream() const { return workStream; }
  ncclComm_t handle() const { return comm; }

  /// The most elements (send/recv: 4-byte units) one NCCL call moves, as in
  /// MpiCommunicator: larger buffers go in chunks cut at fixed offsets.
  /// NCCL counts are size_t, so the limit only guards against bugs past
  /// 2^31 bytes; tests lower it to exercise the chunked paths. Must be the
  /// same on every member; communicators made by split inherit it.
  void setMaxElementsPerCall(size_t n);
  size_t maxElementsPerCall() const { return maxPerCall; }

  static constexpr size_t defaultMaxElementsPerCall = size_t(1) << 28;

private:
  /// Collective over `bootstrap`'s group, on the current device.
  NcclCommunicator(std::unique_ptr<MpiCommunicator> bootstrap, size_t maxPerCall);

  /// Makes cudaDevice current for a call and restores the caller's device.
  class OnDevice;

  [[noreturn]] void fail(const char *call, const std::string &what) const;
  void checkNccl(ncclResult_t rc, const char *call) const;
  void checkCuda(cudaError_t rc, const char *call) const;
  void checkPeer(int peer, const char *call) const;
  /// Aborts unless `p` is device (or managed) memory of this device; a
  /// cheap attribute query, not a bounds check.
  void checkDeviceBuffer(const void *p, size_t bytes, const char *call) const;
  size_t maxBytesPerCall() const;
  /// Issues `bytes` from/to `at` as ncclSend/ncclRecv calls, cut into
  /// chunks; must be called between ncclGroupStart and ncclGroupEnd.
  void issueSend(const void *at, size_t bytes, int peer);
  void issueRecv(void *at, size_t bytes, int peer);
  /// Issues the queued postSends (inside the caller's group).
  void issueQueuedSends();
  /// Issues the queued postSends in a group of their own, if any.
  void flushQueuedSends();
  /// Waits for everything this communicator issued, on any stream,
  /// polling NCCL for asynchronous errors.
  void synchronize();
  /// Makes `s` wait for the communicator's last operation if that went to
  /// another stream; noteIssued records the one just issued on `s`.
  void orderAfterEarlierWork(cudaStream_t s);
  void noteIssued(cudaStream_t s);
  double allReduceScalar(double v, ncclRedOp_t op, const char *call);

  std::unique_ptr<MpiCommunicator> bootstrap;
  ncclComm_t comm = nullptr;
  cudaStream_t workStream = nullptr;
  /// The last operation issued, and its stream (null: none in flight).
  cudaEvent_t lastIssued = nullptr;
  cudaStream_t lastStream = nullptr;
  int cudaDevice = 0;
  int myRank = 0, groupSize = 1;
  size_t maxPerCall;
  /// One double on the device for the scalar reductions and the barrier.
  double *scratch = nullptr;
  /// Its pinned host copy: a device-to-pageable copy returns only when done,
  /// so it would block the host inside the call, before synchronize() can
  /// watch NCCL's asynchronous errors (a dead peer would hang the job).
  double *hostScalar = nullptr;
  /// postSend's device copies: sendBuffers[i] holds queued send i while
  /// i < queued.size(); the buffers are reused by later postSends.
  struct DeviceBuffer {
    void *data = nullptr;
    size_t capacity = 0;
  };
  std::vector<DeviceBuffer> sendBuffers;
  struct QueuedSend {
    size_t bytes;
    int peer;
  };
  std::vector<QueuedSend> queued;
};

} // namespace mist::rt
