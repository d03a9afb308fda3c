//===- CudaDeviceCommunicator.cpp - GPUs: device buffers over NCCL --------===//
#include "runtime/device/DeviceCommunicator.h"

#include "runtime/device/Device.h"
#ifdef MIST_HAVE_NCCL
#include "runtime/comm/NcclCommunicator.h"
#endif

namespace mist::rt::device {

namespace {

#ifdef MIST_HAVE_NCCL
/// The communicator a GPU trainer's ranks use: NCCL. Its collectives are
/// stream-ordered: enqueued on the current stream (the schedule's g2g
/// stream) behind the work already there, which wrote their inputs, and not
/// waited for by the host, so compute on the other streams goes on while
/// they run; later work sees their outputs through stream order or the
/// schedule's events, as it sees a kernel's. Point-to-point calls (pipeline
/// stages) stay blocking: the current stream is synchronized first, and the
/// call returns with the transfer done (NCCL's send kernel waits for the
/// peer's recv, and NcclCommunicator groups queued sends with the next call
/// so that neighbours do not deadlock; see NcclCommunicator.h). The scalar
/// reductions are host values, so they wait by nature: the host needs them
/// (loss, gradient norm), and they report NCCL's asynchronous errors.
class StreamOrderedNccl final : public Communicator {
public:
  explicit StreamOrderedNccl(std::unique_ptr<NcclCommunicator> inner) : nccl(std::move(inner)) {}
  int rank() const override { return nccl->rank(); }
  int size() const override { return nccl->size(); }
  using Communicator::allGather;
  using Communicator::allReduceSum;
  using Communicator::broadcast;
  using Communicator::reduceScatterSum;
  void allReduceSum(void *data, size_t n, DType type) override {
    nccl->allReduceSumOn(stream(), data, n, type);
  }
  void allGather(const void *in, void *out, size_t nPerRank, DType type) override {
    nccl->allGatherOn(stream(), in, out, nPerRank, type);
  }
  void reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) override {
    nccl->reduceScatterSumOn(stream(), in, out, nPerRank, type);
  }
  void broadcast(void *data, size_t n, int root, DType type) override {
    nccl->broadcastOn(stream(), data, n, root, type);
  }
  void send(const void *data, size_t bytes, int peer, int tag) override {
    settle();
    nccl->send(data, bytes, peer, tag);
  }
  void recv(void *data, size_t bytes, int peer, int tag) override {
    settle();
    nccl->recv(data, bytes, peer, tag);
  }
  void postSend(const void *data, size_t bytes, int peer, int tag) override {
    settle();
    nccl->postSend(data, bytes, peer, tag);
  }
  void waitSends() override { nccl->waitSends(); }
  double allReduceMax(double v) override { return nccl->allReduceMax(v); }
  double allReduceSumDouble(double v) override { return nccl->allReduceSumDouble(v); }
  void barrier() override { nccl->barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> part = nccl->split(color, key);
    if (!part)
      return nullptr;
    auto *typed = dynamic_cast<NcclCommunicator *>(part.get());
    if (!typed)
      abortJob("NcclCommunicator::split returned another kind of communicator");
    part.release();
    return std::make_unique<StreamOrderedNccl>(std::unique_ptr<NcclCommunicator>(typed));
  }

private:
  static cudaStream_t stream() { return static_cast<cudaStream_t>(currentStream()); }
  static void settle() { synchronizeStream(currentStream()); }
  std::unique_ptr<NcclCommunicator> nccl;
};
#else
/// Without NCCL (one GPU, so every group has one member): MPI's calls on
/// device memory, which are copies or nothing for one member, after the
/// work enqueued on the current stream, which wrote their inputs.
class SettledCommunicator final : public Communicator {
public:
  explicit SettledCommunicator(std::unique_ptr<Communicator> inner) : inner(std::move(inner)) {}
  int rank() const override { return inner->rank(); }
  int size() const override { return inner->size(); }
  using Communicator::allGather;
  using Communicator::allReduceSum;
  using Communicator::broadcast;
  using Communicator::reduceScatterSum;
  void allReduceSum(void *data, size_t n, DType type) override {
    settle();
    inner->allReduceSum(data, n, type);
  }
  void allGather(const void *in, void *out, size_t nPerRank, DType type) override {
    settle();
    inner->allGather(in, out, nPerRank, type);
  }
  void reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) override {
    settle();
    inner->reduceScatterSum(in, out, nPerRank, type);
  }
  void broadcast(void *data, size_t n, int root, DType type) override {
    settle();
    inner->broadcast(data, n, root, type);
  }
  void send(const void *data, size_t bytes, int peer, int tag) override {
    settle();
    inner->send(data, bytes, peer, tag);
  }
  void recv(void *data, size_t bytes, int peer, int tag) override {
    settle();
    inner->recv(data, bytes, peer, tag);
  }
  void postSend(const void *data, size_t bytes, int peer, int tag) override {
    settle();
    inner->postSend(data, bytes, peer, tag);
  }
  void waitSends() override { inner->waitSends(); }
  double allReduceMax(double v) override { return inner->allReduceMax(v); }
  double allReduceSumDouble(double v) override { return inner->allReduceSumDouble(v); }
  void barrier() override { inner->barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> part = inner->split(color, key);
    if (!part)
      return nullptr;
    return std::make_unique<SettledCommunicator>(std::move(part));
  }

private:
  static void settle() { synchronizeStream(currentStream()); }
  std::unique_ptr<Communicator> inner;
};
#endif

} // namespace

std::unique_ptr<Communicator> makeWorldCommunicator(MpiCommunicator &world) {
#ifdef MIST_HAVE_NCCL
  return std::make_unique<StreamOrderedNccl>(NcclCommunicator::create(world));
#else
  // Built without NCCL: one GPU only (MPI cannot move device memory here).
  if (world.size() > 1)
    abortJob("this GPU trainer was built without NCCL, so it runs on one GPU only; the job has " +
             std::to_string(world.size()) + " ranks");
  return std::make_unique<SettledCommunicator>(world.split(0, world.rank()));
#endif
}

} // namespace mist::rt::device
