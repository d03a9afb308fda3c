//===- NcclProbe.cpp - Collective and point-to-point bandwidth over NCCL --===//
#include "tools/profiler/NcclProbe.h"

#include "runtime/comm/NcclCommunicator.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"

#include <chrono>
#include <cmath>
#include <functional>

namespace mist::profiler {

namespace {

double seconds(const std::function<void()> &f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The median over repetitions of the slowest rank's time of `call`, which
/// every rank of `world` makes (or waits through) after a barrier.
double slowestMedian(rt::MpiCommunicator &world, int warmup, int repeats,
                     const std::function<void()> &call) {
  for (int i = 0; i < warmup; ++i) {
    world.barrier();
    call();
  }
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    world.barrier();
    times.push_back(world.allReduceMax(seconds(call)));
  }
  return median(times);
}

double round4(double v) {
  if (v <= 0)
    return v;
  double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(v))));
  return std::round(v * scale) / scale;
}

} // namespace

NcclFigures measureNccl(rt::MpiCommunicator &world, const NodeLayout &l, int warmup, int repeats) {
  NcclFigures f;
  auto nccl = rt::NcclCommunicator::create(world);
  const size_t gathered = size_t(1) << 30; // bytes of the all-gather's output
  DeviceBuffer<float> out(gathered / sizeof(float)), in(gathered / sizeof(float));

  // One all-gather group shape: `comm` is this rank's group of `n` ranks.
  auto allGather = [&](rt::Communicator &comm, int nodes, int gpusPerNode) {
    const int n = comm.size();
    const size_t perRank = gathered / sizeof(float) / n;
    double big = slowestMedian(world, warmup, repeats,
                               [&] { comm.allGather(in.get(), out.get(), perRank); });
    double small =
        slowestMedian(world, warmup, repeats, [&] { comm.allGather(in.get(), out.get(), 1); });
    CollectiveFigure e;
    e.nodes = nodes;
    e.gpusPerNode = gpusPerNode;
    e.busGBs = round4((n - 1.0) / n * perRank * n * sizeof(float) / big / 1e9);
    e.latencyUs = round4(small * 1e6);
    f.collectives.push_back(e);
  };
  if (l.contiguous && l.ranksPerNode > 1) {
    for (int g = 2; g <= l.ranksPerNode; g *= 2) {
      if (l.ranksPerNode % g)
        continue;
      if (g == l.ranks) {
        allGather(*nccl, 1, g);
      } else {
        auto group = nccl->split(world.rank() / g, world.rank());
        allGather(*group, 1, g);
      }
    }
  }
  if (l.contiguous && l.nodes > 1 && l.ranksPerNode > 0) {
    allGather(*nccl, l.nodes, l.ranksPerNode);
    if (l.ranksPerNode > 1) { // one GPU of each node
      auto group = nccl->split(l.localRank, world.rank());
      allGather(*group, l.nodes, 1);
    }
  }
  if (!l.contiguous || l.ranksPerNode == 0)
    allGather(*nccl, l.nodes, l.ranksPerNode > 0 ? l.ranksPerNode : 1);

  // Point to point between two ranks; the others wait.
  auto sendRecv = [&](int a, int b, size_t bytes) {
    return slowestMedian(world, warmup, repeats, [&] {
      if (world.rank() == a)
        nccl->send(in.get(), bytes, b, 0);
      else if (world.rank() == b)
        nccl->recv(out.get(), bytes, a, 0);
    });
  };
  const size_t p2pBytes = size_t(256) << 20;
  if (l.contiguous && l.ranksPerNode > 1) {
    f.p2pIntraGBs = round4(p2pBytes / sendRecv(0, 1, p2pBytes) / 1e9);
    f.p2pLatencyUs = round4(sendRecv(0, 1, 4) * 1e6);
  }
  if (l.contiguous && l.nodes > 1 && l.ranksPerNode > 0) {
    f.p2pInterGBs = round4(p2pBytes / sendRecv(0, l.ranksPerNode, p2pBytes) / 1e9);
    if (f.p2pLatencyUs < 0)
      f.p2pLatencyUs = round4(sendRecv(0, l.ranksPerNode, 4) * 1e6);
  }
  f.how = "NCCL all-gather of 1 GiB gathered (busbw) and of 4 bytes per rank (latency), "
          "slowest rank, wall clock around the blocking call";
  return f;
}

} // namespace mist::profiler
