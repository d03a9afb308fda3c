//===- MistProfile.cu - Measure a cluster for mistc's performance model ---===//
/// \file
/// mist-profile: measures on this machine's GPU(s) what the performance
/// model needs and writes the cluster YAML the tuner reads
/// (docs/cluster.md, "Profiling a cluster"):
///  (a) the time of every op of a shapes file (mistc --emit=profile-shapes)
///      with the stdlib CUDA kernels (OpTimer);
///  (b) device memory bandwidth (1 GiB device-to-device copy) and the
///      achieved rate of a large bf16 GEMM against the datasheet peak;
///  (c) pinned host<->device bandwidth and latency, on every rank at once;
///  (d) stream interference (compute GEMM vs copies; Interference);
///  (e) with 2+ MPI ranks, one GPU each: NCCL all-gather bus bandwidth and
///      p2p links (NcclProbe; only where mistrtCommNccl was built).
/// Figures it cannot measure come from --base and the flags (ProfilerOptions).
/// Exit status: 0 written, 77 no GPU, 2 bad arguments or inputs, 1 a
/// measurement failed.
//===----------------------------------------------------------------------===//
#include "tools/profiler/Bandwidth.h"
#include "tools/profiler/Bf16Gemm.h"
#include "tools/profiler/ClusterAssembly.h"
#include "tools/profiler/ClusterYamlWriter.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"
#include "tools/profiler/Interference.h"
#include "tools/profiler/OpTimer.h"
#include "tools/profiler/ProfileInputs.h"
#include "tools/profiler/ProfilerOptions.h"
#include "tools/profiler/ShapesFile.h"
#include "tools/profiler/UtcNow.h"

#ifdef MIST_PROFILE_NCCL
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#include "tools/profiler/NcclProbe.h"
#include "tools/profiler/NodeLayout.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mist::profiler;

namespace {

/// The MPI rank count the launcher announced (1 when not under mpirun).
int launcherRanks() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char *v = std::getenv(var))
      return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") ? 2 : 1; // PMIx without a size variable: assume several
}

[[maybe_unused]] int launcherRank() {
  for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char *v = std::getenv(var))
      return std::atoi(v);
  return 0;
}

std::string hostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string cudaVersions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  auto text = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  return "CUDA runtime " + text(runtime) + ", driver " + text(driver);
}

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// What rank 0 measures on its GPU while the other ranks wait: (a), (b), (d).
void measureDevice(const ProfilerOptions &opts, const std::vector<ShapeEntry> &shapes,
                   Measurements &m) {
  cudaDeviceProp prop{};
  int device = 0;
  checkCuda(cudaGetDevice(&device), "cudaGetDevice");
  checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  m.deviceName = prop.name;
  m.memoryGiB = prop.totalGlobalMem / double(1ull << 30);
  std::fprintf(stderr, "mist-profile: %s, %.2f GiB, sm_%d%d\n", prop.name, m.memoryGiB, prop.major,
               prop.minor);
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  // (a) op times.
  if (!shapes.empty()) {
    OpTimerOptions to;
    to.warmup = opts.warmup;
    to.repeats = opts.repeats;
    to.linearGrad = opts.linearGrad;
    OpTimer timer(to, stream);
    recordOpTimes(
        shapes, opts, "mist-profile", [&](const ShapeEntry &e) { return timer.time(e); }, m);
    m.opsHow = std::string("stdlib/kernels on random data: fp32 kernels, linear and lm_head as "
                           "bf16 GEMMs, their _grad ops ") +
               (opts.linearGrad == LinearGradMode::Bf16Gemms ? "as two bf16 GEMMs"
                : opts.linearGrad == LinearGradMode::Tf32    ? "by linearBwdCuda (tf32)"
                                                             : "by linearBwdCuda (fp32)");
  }

  // (b) memory bandwidth and the bf16 GEMM rate.
  const size_t gib = size_t(1) << 30;
  m.d2dGBs = deviceCopyGBs(gib, opts.warmup, opts.repeats, stream);
  m.d2dWhat = "1 GiB";
  std::fprintf(stderr, "mist-profile: device-to-device copy: %.1f GB/s (read + write)\n", m.d2dGBs);
  {
    Bf16Gemm gemm(8192, 8192, 8192, stream);
    double t = medianSeconds(stream, opts.warmup, opts.repeats, [&] { gemm.launch(); });
    m.gemmTflops = gemm.flops() / t / 1e12;
    m.gemmShape = gemm.shape();
    std::fprintf(stderr, "mist-profile: bf16 GEMM %s: %.1f TFLOP/s\n", m.gemmShape.c_str(),
                 m.gemmTflops);
  }

  // (d) interference.
  if (opts.interference) {
    InterferenceOptions io;
    io.warmup = opts.warmup;
    io.repeats = opts.repeats;
    io.targetMs = opts.interferenceMs;
    InterferenceResult r = measureInterference(io);
    m.interference = r.table;
    m.interferenceHow = r.how;
    for (const InterferenceFigure &f : r.table) {
      std::string line;
      for (size_t i = 0; i < f.streams.size(); ++i)
        line += (i ? ", " : "") + f.streams[i] + " x" + fmt("%.3f", f.factors[i]);
      std::fprintf(stderr, "mist-profile: interference: %s\n", line.c_str());
    }
  }
  cudaStreamDestroy(stream);
}

} // namespace

int main(int argc, char **argv) {
  ProfilerOptions opts;
  bool help = false;
  std::string error;
  bool parsed = parseProfilerOptions(argc, argv, opts, help, error);
  if (parsed && help) {
    std::fputs(profilerUsage(), stdout);
    return 0;
  }
  int devices = 0;
  cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("mist-profile: no GPU (%s); nothing measured\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "no CUDA device");
    return 77;
  }
  if (!parsed) {
    std::fprintf(stderr, "mist-profile: %s\n", error.c_str());
    return 2;
  }

  std::optional<ClusterFigures> base;
  std::vector<ShapeEntry> shapes;
  if (!readProfileInputs(opts, base, shapes, error)) {
    std::fprintf(stderr, "mist-profile: %s\n", error.c_str());
    return 2;
  }

  Measurements m;
  m.when = utcNow();
  m.host = hostName();
  m.software = cudaVersions();
  m.repeats = opts.repeats;
  m.warmup = opts.warmup;
  int rank = 0;
  bool ncclAvailable = false;
#ifdef MIST_PROFILE_NCCL
  std::unique_ptr<mist::rt::MpiRuntime> mpi;
  std::unique_ptr<mist::rt::MpiCommunicator> world;
  NodeLayout layout;
  if (launcherRanks() > 1) {
    mpi = std::make_unique<mist::rt::MpiRuntime>(argc, argv);
    world = mist::rt::MpiCommunicator::world();
    mist::rt::NcclCommunicator::selectLocalDevice(*world);
    layout = nodeLayout(*world);
    rank = world->rank();
    m.ranks = layout.ranks;
    m.nodes = layout.nodes;
    m.ranksPerNode = layout.ranksPerNode;
    m.host = layout.host;
    ncclAvailable = true;
  }
#else
  if (launcherRanks() > 1) {
    if (launcherRank() != 0)
      return 0; // rank 0 measures its GPU alone
    m.ncclSkipped = "mist-profile was built without mistrtCommNccl (NCCL), so it runs one rank";
    std::fprintf(stderr, "mist-profile: %s\n", m.ncclSkipped.c_str());
  }
#endif
  if (m.ranks == 1 && m.ncclSkipped.empty())
    m.ncclSkipped = "one rank (run one rank per GPU under mpirun to measure them)";
  if (!checkAssemblyInputs(base, opts, m.ranks, m.nodes, m.ranksPerNode, ncclAvailable, error)) {
    if (rank == 0)
      std::fprintf(stderr, "mist-profile: %s\n", error.c_str());
    return 2;
  }

  auto barrier = [&] {
#ifdef MIST_PROFILE_NCCL
    if (world)
      world->barrier();
#endif
  };
  auto fatal = [&](const std::string &what) {
    std::fprintf(stderr, "mist-profile: rank %d: %s\n", rank, what.c_str());
#ifdef MIST_PROFILE_NCCL
    if (world)
      mist::rt::abortJob("mist-profile: " + what);
#endif
    std::exit(1);
  };

  try {
    if (rank == 0)
      measureDevice(opts, shapes, m);
    barrier();
    // (c) host links: every rank copies at once; the slowest GPU's figures.
    cudaStream_t stream = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    HostLinks links = measureHostLinks(size_t(1) << 30, opts.warmup, opts.repeats, stream);
    cudaStreamDestroy(stream);
#ifdef MIST_PROFILE_NCCL
    if (world) {
      links.h2dGBs = -world->allReduceMax(-links.h2dGBs);
      links.d2hGBs = -world->allReduceMax(-links.d2hGBs);
      links.latencyUs = world->allReduceMax(links.latencyUs);
    }
#endif
    m.h2dGBs = links.h2dGBs;
    m.d2hGBs = links.d2hGBs;
    m.hostLatencyUs = links.latencyUs;
    m.hostWhat = "pinned 1 GiB copies, " +
                 std::string(m.ranks > 1 ? "all ranks at once, the slowest" : "one GPU") + ": " +
                 fmt("%.1f", m.h2dGBs) + " / " + fmt("%.1f", m.d2hGBs) + " GB/s";
    if (rank == 0)
      std::fprintf(stderr, "mist-profile: host to device %.1f GB/s, device to host %.1f GB/s\n",
                   m.h2dGBs, m.d2hGBs);
#ifdef MIST_PROFILE_NCCL
    // (e) collectives and p2p.
    if (world && world->size() > 1) {
      LinkFigures n = measureNccl(*world, layout, opts.warmup, opts.repeats);
      m.collectives = n.collectives;
      m.collectivesHow = n.how;
      m.p2pIntraGBs = n.p2pIntraGBs;
      m.p2pInterGBs = n.p2pInterGBs;
      m.p2pLatencyUs = n.p2pLatencyUs;
      if (rank == 0)
        for (const CollectiveFigure &e : n.collectives)
          std::fprintf(stderr,
                       "mist-profile: all-gather %d node(s) x %d GPU(s): %.1f GB/s busbw, "
                       "%.1f us\n",
                       e.nodes, e.gpusPerNode, e.busGBs, e.latencyUs);
    }
#endif
  } catch (const GpuError &e) {
    fatal(e.what());
  }
  if (rank != 0)
    return 0;

  AssembledCluster out;
  if (!assembleCluster(m, base, opts, out, error))
    fatal(error);
  for (const std::string &w : out.warnings)
    std::fprintf(stderr, "mist-profile: warning: %s\n", w.c_str());
  std::ofstream file(opts.out);
  writeClusterYaml(out.figures, out.comment, file);
  file.close();
  if (!file)
    fatal("cannot write '" + opts.out + "'");
  std::fprintf(stderr, "mist-profile: wrote %s (%zu measured ops, %zu not timed)\n",
               opts.out.c_str(), m.ops.size(), m.notTimed.size());
  return 0;
}
