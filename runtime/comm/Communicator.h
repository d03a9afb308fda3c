//===- Communicator.h - Collectives and p2p for one process group ---------===//
/// \file
/// The one interface the trainer talks to for every process group (world,
/// a stage's tp group, its dp group): collectives over fp32 or bf16 buffers
/// (a bf16 sum adds in fp32 and rounds at every step, as NCCL's does),
/// point-to-point over bytes, a few scalar reductions, and `split` to make
/// sub-groups. MpiCommunicator implements it over MPI (CPU ranks, and the
/// bootstrap on GPUs); NcclCommunicator implements it on GPUs.
///
/// Contract of every implementation:
/// - Collectives are called by every member, in the same order, with the
///   same sizes (and the same root); p2p pairs a send with a recv of the same
///   byte count and tag. Breaking this is a bug in the caller: it may hang
///   or abort the job, it is never silently tolerated.
/// - Results are deterministic: the same inputs on the same group give the
///   same bits on every run, and every all-reduce result (allReduceSum,
///   allReduceMax, allReduceSumDouble) is bitwise identical on every member,
///   so replicated state (parameters, loss, gradient norm) never drifts
///   between ranks.
/// - Sizes are `size_t` element counts; buffers larger than one call of the
///   underlying library allows (MPI counts are `int`) are moved in chunks.
/// - A failure of the transport ends the whole job with a message naming
///   the rank (see abortJob); no call returns an error.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/DType.h"
#include <cstddef>
#include <memory>

namespace mist::rt {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This process's rank in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Element-wise sum over the group, in place.
  virtual void allReduceSum(void *data, size_t n, DType type) = 0;
  /// `out` (size() * nPerRank elements) receives every member's `in`, in
  /// rank order. `in` must not overlap `out`.
  virtual void allGather(const void *in, void *out, size_t nPerRank, DType type) = 0;
  /// `in` holds size() * nPerRank elements; member r receives in `out` the
  /// sum over the group of the r-th block of nPerRank. `in` must not overlap `out`.
  virtual void reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) = 0;
  /// Every member's `data` becomes the root's.
  virtual void broadcast(void *data, size_t n, int root, DType type) = 0;

  // The same over fp32 buffers.
  void allReduceSum(float *data, size_t n) { allReduceSum(data, n, DType::F32); }
  void allGather(const float *in, float *out, size_t nPerRank) {
    allGather(in, out, nPerRank, DType::F32);
  }
  void reduceScatterSum(const float *in, float *out, size_t nPerRank) {
    reduceScatterSum(in, out, nPerRank, DType::F32);
  }
  void broadcast(float *data, size_t n, int root) { broadcast(data, n, root, DType::F32); }

  /// Blocking point-to-point; `peer` is a rank in this group. Messages
  /// between two ranks with the same tag arrive in the order they were sent.
  virtual void send(const void *data, size_t bytes, int peer, int tag) = 0;
  /// Receives exactly `bytes`; a message of another size aborts the job.
  virtual void recv(void *data, size_t bytes, int peer, int tag) = 0;
  /// A send that does not wait for the receiver: the bytes are copied at
  /// once (the caller may reuse `data`) and delivered in order with the
  /// blocking sends of the same tag. Pipelines need it: under 1F1B a stage
  /// sends activations forward while its neighbour sends gradients back, and
  /// two blocking sends facing each other would wait for ever.
  virtual void postSend(const void *data, size_t bytes, int peer, int tag) = 0;
  /// Waits until every postSend of this member has been delivered.
  virtual void waitSends() = 0;

  virtual double allReduceMax(double v) = 0;
  virtual double allReduceSumDouble(double v) = 0;
  virtual void barrier() = 0;

  /// Members with the same color form a new communicator ordered by key
  /// (ties by rank here); color < 0 returns nullptr. Collective: every member
  /// calls it, including those passing a negative color.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

} // namespace mist::rt
