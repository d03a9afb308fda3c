//===- CollectiveProbe.cpp - Collective and point-to-point bandwidth ------===//
#include "tools/profiler/CollectiveProbe.h"

#include "runtime/comm/MpiCommunicator.h"
#include "tools/profiler/Median.h"

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

LinkFigures measureLinks(rt::MpiCommunicator &world, rt::Communicator &comm, const NodeLayout &l,
                         const ProbeBuffers &buffers, int warmup, int repeats,
                         const std::string &how) {
  LinkFigures f;
  const size_t gathered = buffers.gatheredBytes; // bytes of the all-gather's output
  float *in = buffers.in, *out = buffers.out;

  // One all-gather group shape: `group` is this rank's group of `n` ranks.
  auto allGather = [&](rt::Communicator &group, int nodes, int gpusPerNode) {
    const int n = group.size();
    const size_t perRank = gathered / sizeof(float) / n;
    double big = slowestMedian(world, warmup, repeats, [&] { group.allGather(in, out, perRank); });
    double small = slowestMedian(world, warmup, repeats, [&] { group.allGather(in, out, 1); });
    CollectiveLink e;
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
        allGather(comm, 1, g);
      } else {
        auto group = comm.split(world.rank() / g, world.rank());
        allGather(*group, 1, g);
      }
    }
  }
  if (l.contiguous && l.nodes > 1 && l.ranksPerNode > 0) {
    allGather(comm, l.nodes, l.ranksPerNode);
    if (l.ranksPerNode > 1) { // one rank of each node
      auto group = comm.split(l.localRank, world.rank());
      allGather(*group, l.nodes, 1);
    }
  }
  if (!l.contiguous || l.ranksPerNode == 0)
    allGather(comm, l.nodes, l.ranksPerNode > 0 ? l.ranksPerNode : 1);

  // Point to point between two ranks; the others wait.
  auto sendRecv = [&](int a, int b, size_t bytes) {
    return slowestMedian(world, warmup, repeats, [&] {
      if (world.rank() == a)
        comm.send(in, bytes, b, 0);
      else if (world.rank() == b)
        comm.recv(out, bytes, a, 0);
    });
  };
  const size_t p2pBytes = buffers.p2pBytes;
  if (l.contiguous && l.ranksPerNode > 1) {
    f.p2pIntraGBs = round4(p2pBytes / sendRecv(0, 1, p2pBytes) / 1e9);
    f.p2pLatencyUs = round4(sendRecv(0, 1, 4) * 1e6);
  }
  if (l.contiguous && l.nodes > 1 && l.ranksPerNode > 0) {
    f.p2pInterGBs = round4(p2pBytes / sendRecv(0, l.ranksPerNode, p2pBytes) / 1e9);
    if (f.p2pLatencyUs < 0)
      f.p2pLatencyUs = round4(sendRecv(0, l.ranksPerNode, 4) * 1e6);
  }
  f.how = how;
  return f;
}

} // namespace mist::profiler
