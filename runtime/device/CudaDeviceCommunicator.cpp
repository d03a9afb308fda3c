//===- CudaDeviceCommunicator.cpp - GPUs: device buffers over NCCL --------===//
#include "runtime/device/DeviceCommunicator.h"

#include "runtime/device/Device.h"
#ifdef MIST_HAVE_NCCL
#include "runtime/comm/NcclCommunicator.h"
#endif

namespace mist::rt::device {

namespace {

/// A communicator whose calls first wait for the work enqueued on the
/// current stream, so the buffers they read are complete (NCCL runs on its
/// own stream, and its calls return with their outputs ready).
class StreamOrderedCommunicator final : public Communicator {
public:
  explicit StreamOrderedCommunicator(std::unique_ptr<Communicator> inner)
      : inner(std::move(inner)) {}
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
    return std::make_unique<StreamOrderedCommunicator>(std::move(part));
  }

private:
  void settle() { synchronizeStream(currentStream()); }
  std::unique_ptr<Communicator> inner;
};

} // namespace

std::unique_ptr<Communicator> makeWorldCommunicator(MpiCommunicator &world) {
#ifdef MIST_HAVE_NCCL
  return std::make_unique<StreamOrderedCommunicator>(NcclCommunicator::create(world));
#else
  // Built without NCCL: one GPU only (MPI cannot move device memory here).
  if (world.size() > 1)
    abortJob("this GPU trainer was built without NCCL, so it runs on one GPU only; the job has " +
             std::to_string(world.size()) + " ranks");
  return std::make_unique<StreamOrderedCommunicator>(world.split(0, world.rank()));
#endif
}

} // namespace mist::rt::device
