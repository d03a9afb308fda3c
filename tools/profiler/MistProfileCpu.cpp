//===- MistProfileCpu.cpp - A cluster file for one CPU rank ----------------===//
/// \file
/// mist-profile-cpu: what mist-profile measures on a GPU, measured on this
/// machine's CPU as the trainer's CPU ranks use it: the shapes file's ops
/// with the CPU ops (CpuOpTimer), an fp32 GEMM's rate, the memory copy rate,
/// and the same copy rate for the "host" links (on a CPU rank offloading is
/// a copy within host memory). Each op call starts with the caches as the
/// trainer's step leaves them (CpuOpTimer.h). Under mpirun with several
/// ranks (one per core) every rank times the shapes file's ops at once, each
/// call released together by a barrier, and the file keeps the mean over
/// the ranks: the trainer's ranks compute at once and share the node's
/// caches and memory bandwidth, which can slow each core's ops against a
/// core computing alone (the one-rank file's figures, for plans on one
/// core; on the 2-core host of bench/time the two differ by under 1% in
/// sum). Then all ranks measure MPI's
/// collectives and point-to-point links (CollectiveProbe), as the trainer's
/// CPU ranks communicate. It writes a cluster file whose "GPUs" are CPU
/// cores, so that mistc predicts the CPU trainer; the time model is checked
/// against it in bench/time/. Flags are mist-profile's
/// (tools/profiler/ProfilerOptions.h); --linear-grad does not apply, and the
/// interference table is measured only with --overlap (the trainer's CPU
/// streams on threads, CpuInterference.h): without it a CPU rank runs its
/// streams' work in turn on one thread, which the table says with factor k
/// for each of k busy streams (streamsInTurn).
//===----------------------------------------------------------------------===//
#include "format/ClusterWriter.h"
#include "format/Streams.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/device/Device.h"
#include "runtime/ops/Ops.h"
#include "tools/profiler/ClusterAssembly.h"
#include "tools/profiler/CollectiveProbe.h"
#include "tools/profiler/CpuInterference.h"
#include "tools/profiler/CpuOpTimer.h"
#include "tools/profiler/ProfileInputs.h"
#include "tools/profiler/ProfilerOptions.h"
#include "tools/profiler/ShapesFile.h"
#include "tools/profiler/UtcNow.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h> // sysconf
#include <utility>
#include <vector>

using namespace mist::profiler;

namespace {

/// The CPU's model name from /proc/cpuinfo, else "CPU".
std::string cpuName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size())
        return line.substr(colon + 2);
    }
  return "CPU";
}

/// Read + write bytes per second / 1e9 of copying `bytes` within host memory.
double copyGBs(size_t bytes, int warmup, int repeats) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double t = medianHostSeconds(warmup, repeats, [&] { std::memcpy(b.data(), a.data(), bytes); });
  return 2.0 * static_cast<double>(bytes) / t / 1e9;
}

/// The shapes file's ops, on every rank of `world` at once (each call
/// released by a barrier); rank 0 records the mean over the ranks in `m`.
void timeOps(const ProfilerOptions &opts, const std::vector<ShapeEntry> &shapes,
             mist::rt::MpiCommunicator &world, Measurements &m) {
  const int ranks = world.size();
  std::function<void()> together;
  if (ranks > 1)
    together = [&world] { world.barrier(); };
  auto time = [&](const ShapeEntry &e) {
    OpTime t =
        timeOpOnCpu(e, opts.warmup, opts.repeats,
                    opts.dtype == "bf16" ? mist::rt::DType::BF16 : mist::rt::DType::F32, together);
    if (ranks == 1)
      return t;
    const double timedOn = world.allReduceSumDouble(t.timed ? 1 : 0);
    const double sum = world.allReduceSumDouble(t.timed ? t.seconds : 0);
    if (timedOn == ranks)
      t.seconds = sum / ranks;
    else if (t.timed)
      t = OpTime{false, 0, "not timed on every rank"};
    return t;
  };
  if (world.rank() != 0) { // the same calls in the same order, recorded by rank 0
    for (const ShapeEntry &e : shapes)
      if (!opts.skipOps.count(e.op))
        time(e);
    return;
  }
  recordOpTimes(shapes, opts, "mist-profile-cpu", time, m);
  m.opsHow =
      "the CPU ops of runtime/ops (the trainer's CPU ranks) on random host data, " +
      std::string(opts.dtype == "bf16" ? "bf16 weights and activations (fp32 "
                                         "statistics, loss and weight gradients)"
                                       : "fp32") +
      ", one thread, the caches as the step leaves them (evicted, the inputs the ops "
      "before wrote read back)" +
      (ranks > 1 ? ", on all " + std::to_string(ranks) + " ranks at once (the mean over the ranks)"
                 : std::string(", one core busy"));
}

/// The fastest rate of the timed forward GEMMs (linear, lm_head) of the
/// shapes file, and the shape that reached it; {0, ""} when none was timed.
std::pair<double, std::string> fastestTimedGemm(const std::vector<ShapeEntry> &shapes,
                                                const Measurements &m) {
  std::pair<double, std::string> best{0, ""};
  for (const mist::MeasuredOp &f : m.ops) {
    if ((f.op != "linear" && f.op != "lm_head") || f.seconds <= 0)
      continue;
    for (const ShapeEntry &e : shapes) {
      if (e.op != f.op || e.shape != f.shape || e.operands.size() < 2 || e.operands[0].empty() ||
          e.operands[1].size() != 2)
        continue;
      const double in = double(e.operands[0].back());
      double rows = 1;
      for (int64_t d : e.operands[0])
        rows *= double(d);
      rows /= in;
      const double out = double(f.op == "lm_head" ? e.operands[1][0] : e.operands[1][1]);
      const double tflops = 2 * rows * in * out / f.seconds / 1e12;
      if (tflops > best.first)
        best = {tflops, f.op + " " + f.shape};
    }
  }
  return best;
}

void describeCpu(Measurements &m) {
  m.deviceName = cpuName() + " (one core)";
  m.deviceNameWhat = "the model name in /proc/cpuinfo";
  m.memoryWhat = "the host's physical memory (sysconf)";
  m.baseMemoryFirst = true;
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  m.memoryGiB = pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) / (1ull << 30) : 0;
  std::fprintf(stderr, "mist-profile-cpu: %s, %.2f GiB of host memory\n", m.deviceName.c_str(),
               m.memoryGiB);
}

/// The copy rate and the GEMM peak, on rank 0 alone (after the ops, whose
/// fastest GEMM may raise the peak).
void measureCpu(const ProfilerOptions &opts, const std::vector<ShapeEntry> &shapes,
                Measurements &m) {
  const size_t bytes = size_t(256) << 20;
  m.d2dGBs = copyGBs(bytes, opts.warmup, opts.repeats);
  m.d2dWhat = "256 MiB";
  m.copyWhat = "memcpy within host memory";
  std::fprintf(stderr, "mist-profile-cpu: memory copy: %.2f GB/s (read + write)\n", m.d2dGBs);
  {
    const mist::rt::ops::Index n = 512;
    std::vector<float> x(n * n, 0.5f), w(n * n, 0.25f), y(n * n);
    double t = medianHostSeconds(opts.warmup, opts.repeats, [&] {
      mist::rt::ops::linear(y.data(), x.data(), w.data(), nullptr, n, n, n);
    });
    m.gemmTflops = 2.0 * n * n * n / t / 1e12;
    m.gemmShape = "512x512x512";
    m.gemmKind = "fp32";
    m.gemmCall = "ops::linear";
    // The reference GEMM is fastest on operands that fit in the caches: the
    // peak is the best rate seen, so that no op runs above 100% of it.
    auto [tflops, shape] = fastestTimedGemm(shapes, m);
    if (tflops > m.gemmTflops) {
      m.gemmTflops = tflops;
      m.gemmShape = "512x512x512 and the timed forward GEMMs, fastest " + shape;
    }
    std::fprintf(stderr, "mist-profile-cpu: GEMM %s: %.4f TFLOP/s\n", m.gemmShape.c_str(),
                 m.gemmTflops);
  }
  // Offloading on a CPU rank copies within host memory: one direction.
  m.h2dGBs = m.d2hGBs = m.d2dGBs / 2;
  m.hostLatencyUs = 0;
  m.hostLatencyWhat = "0: a copy within host memory has no transfer to set up";
  m.hostWhat = "the memcpy rate, one direction: offloading on a CPU rank copies within host memory";
}

/// The interference table (measureCpu's note): without --overlap the rule
/// of streams in turn; with it timed on rank 0, and under mpirun on every
/// rank at once, each timing released by a barrier, since the trainer's
/// ranks run their streams' threads on the node's shared cores (two ranks on
/// two cores: four busy threads, not two).
void measureStreams(const ProfilerOptions &opts, mist::rt::MpiCommunicator &world,
                    Measurements &m) {
  const bool lead = world.rank() == 0;
  if (!opts.overlap) {
    if (lead) {
      const InterferenceResult r = streamsInTurn();
      m.interference = r.table;
      m.interferenceHow = r.how;
    }
    return;
  }
  CpuInterferenceOptions io;
  io.warmup = opts.warmup;
  io.repeats = std::max(1, opts.repeats);
  io.targetMs = opts.interferenceMs;
  if (world.size() > 1)
    io.together = [&world] { world.barrier(); };
  InterferenceResult r = measureCpuInterference(io);
  if (!lead)
    return;
  if (world.size() > 1)
    r.how += ", every one of the " + std::to_string(world.size()) + " ranks at once";
  m.interference = r.table;
  m.interferenceHow = r.how;
  for (const mist::InterferenceEntry &e : r.table) {
    std::string line;
    for (size_t i = 0; i < e.streams.size(); ++i)
      line += std::string(i ? ", " : "") + mist::streamName(e.streams[i]) + " x" +
              std::to_string(e.factors[i]).substr(0, 5);
    std::fprintf(stderr, "mist-profile-cpu: interference: %s\n", line.c_str());
  }
}

} // namespace

/// Collectives and p2p over MPI between the ranks, on host buffers.
void measureMpiLinks(mist::rt::MpiCommunicator &world, const NodeLayout &layout,
                     const ProfilerOptions &opts, Measurements &m) {
  const size_t gathered = size_t(256) << 20;
  std::vector<float> in(gathered / sizeof(float), 1.f), out(gathered / sizeof(float));
  ProbeBuffers b{in.data(), out.data(), gathered, size_t(64) << 20};
  LinkFigures f = measureLinks(world, world, layout, b, opts.warmup, opts.repeats,
                               "MPI all-gather of 256 MiB gathered (busbw) and of 4 bytes per "
                               "rank (latency) between CPU ranks, slowest rank");
  m.collectives = f.collectives;
  m.collectivesHow = f.how;
  m.p2pIntraGBs = f.p2pIntraGBs;
  m.p2pInterGBs = f.p2pInterGBs;
  m.p2pLatencyUs = f.p2pLatencyUs;
  m.p2pHow = "MPI send/recv of 64 MiB";
  m.p2pLatencyHow = "MPI send/recv of 4 bytes";
  if (world.rank() == 0)
    for (const mist::CollectiveLink &e : f.collectives)
      std::fprintf(stderr,
                   "mist-profile-cpu: all-gather %d node(s) x %d rank(s): %.2f GB/s busbw, "
                   "%.1f us\n",
                   e.nodes, e.gpusPerNode, e.busGBs, e.latencyUs);
}

int main(int argc, char **argv) {
  mist::rt::MpiRuntime mpi(argc, argv);
  auto world = mist::rt::MpiCommunicator::world();
  const bool lead = world->rank() == 0;
  ProfilerOptions opts;
  bool help = false;
  std::string error;
  if (!parseProfilerOptions(argc, argv, opts, help, error)) {
    if (lead)
      std::fprintf(stderr, "mist-profile-cpu: %s\n", error.c_str());
    return 2;
  }
  if (help) {
    if (!lead)
      return 0;
    std::puts("usage: mist-profile-cpu --out cluster.yaml [--shapes FILE] [--base FILE] "
              "[--repeats N] [--warmup N] ...\n\n"
              "mist-profile's measurements on one CPU core, as the trainer's CPU ranks run:\n"
              "the shapes file's ops with the CPU ops, an fp32 GEMM, the memory copy rate.\n"
              "The other flags are mist-profile's (below); --linear-grad does not apply, and\n"
              "stream interference is measured with --overlap only.\n");
    std::fputs(profilerUsage(), stdout);
    return 0;
  }
  std::optional<mist::Cluster> base;
  std::vector<ShapeEntry> shapes;
  std::string shapesDtype;
  if (!readProfileInputs(opts, base, shapes, error, &shapesDtype)) {
    if (lead)
      std::fprintf(stderr, "mist-profile-cpu: %s\n", error.c_str());
    return 2;
  }
  // The ops are timed in the model's dtype, which the shapes file records:
  // a bf16 model profiled in f32 would be predicted at the wrong speed.
  if (!shapesDtype.empty() && shapesDtype != "f32" && shapesDtype != "bf16") {
    if (lead)
      std::fprintf(stderr, "mist-profile-cpu: --shapes: dtype '%s' is not f32 or bf16\n",
                   shapesDtype.c_str());
    return 2;
  }
  if (!shapesDtype.empty() && !opts.dtypeGiven)
    opts.dtype = shapesDtype;
  else if (!shapesDtype.empty() && shapesDtype != opts.dtype && lead)
    std::fprintf(stderr,
                 "mist-profile-cpu: warning: --dtype %s, but the shapes are of a %s model: "
                 "its trainer computes in %s\n",
                 opts.dtype.c_str(), shapesDtype.c_str(), shapesDtype.c_str());
  if (lead && !opts.shapesPath.empty())
    std::fprintf(stderr, "mist-profile-cpu: timing the ops in %s%s\n", opts.dtype.c_str(),
                 opts.dtypeGiven       ? " (--dtype)"
                 : shapesDtype.empty() ? " (the default)"
                                       : " (the model's)");
  Measurements m;
  m.tool = "mist-profile-cpu";
  m.timer = "the steady clock";
  m.when = utcNow();
  // One thread, as each trainer rank runs by default (--threads 1): OpenMP
  // would otherwise give the ops every core and halve their times.
  mist::rt::ops::setThreadsPerRank(1);
  // The trainer's allocator settings (runtime/device/HostDevice.cpp): freed
  // memory stays mapped. Without them the ops' transient buffers (the bf16
  // ops' fp32 staging copies, scratch) come back from the kernel as fresh
  // pages at every call, and their page faults double a bf16 elementwise
  // op's time against the trainer's.
  mist::rt::device::initialize(world->localRank());
  m.software = "mist-profile-cpu, " + mist::rt::ops::describe();
  m.repeats = opts.repeats;
  m.warmup = opts.warmup;
  NodeLayout layout = nodeLayout(*world);
  m.ranks = layout.ranks;
  m.nodes = layout.nodes;
  m.ranksPerNode = layout.ranksPerNode;
  m.host = layout.host;
  if (m.ranks == 1)
    m.ncclSkipped = "one rank (run one rank per core under mpirun to measure MPI's collectives)";
  if (!checkAssemblyInputs(base, opts, m.ranks, m.nodes, m.ranksPerNode,
                           /*ncclAvailable=*/m.ranks > 1, error)) {
    if (lead)
      std::fprintf(stderr, "mist-profile-cpu: %s\n", error.c_str());
    return 2;
  }
  if (lead)
    describeCpu(m);
  timeOps(opts, shapes, *world, m); // every rank at once
  if (lead)
    measureCpu(opts, shapes, m); // alone: the other ranks wait
  world->barrier();
  measureStreams(opts, *world, m);
  if (m.ranks > 1)
    measureMpiLinks(*world, layout, opts, m);
  if (!lead)
    return 0;

  AssembledCluster out;
  if (!assembleCluster(m, base, opts, out, error)) {
    std::fprintf(stderr, "mist-profile-cpu: %s\n", error.c_str());
    return 1;
  }
  for (const std::string &w : out.warnings)
    std::fprintf(stderr, "mist-profile-cpu: warning: %s\n", w.c_str());
  std::ofstream file(opts.out);
  mist::writeClusterYaml(out.figures, out.comment, file);
  file.close();
  if (!file) {
    std::fprintf(stderr, "mist-profile-cpu: cannot write '%s'\n", opts.out.c_str());
    return 1;
  }
  const size_t inFile = out.figures.device.measured.size();
  std::fprintf(stderr,
               "mist-profile-cpu: wrote %s (%zu op times measured now, %zu not timed; %zu in the "
               "file%s)\n",
               opts.out.c_str(), m.ops.size(), m.notTimed.size(), inFile,
               inFile > m.ops.size() ? ", the others kept from --base" : "");
  return 0;
}
