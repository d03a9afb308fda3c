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
#include "format/ClusterWriter.h"
#include "tools/profiler/Bandwidth.h"
#include "tools/profiler/Bf16Gemm.h"
#include "tools/profiler/ClusterAssembly.h"
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
    for (const mist::InterferenceEntry &f : r.table) {
      std::string line;
      for (size_t i = 0; i < f.streams.size(); ++i)
        line += (i ? ", " : "") + std::string(mist::streamName(f.streams[i])) + " x" +
                fmt("%.3f", f.factors[i]);
      std::fprintf(stderr, "mist-profile: interference: %s\n", line.c_str());
    }
  }
  cudaStreamDestroy(stream);
}

/// Parses the command line and looks for a GPU: the exit status when the
/// run ends here (--help 0, no GPU 77, bad arguments 2).
std::optional<int> startUp(int argc, char **argv, ProfilerOptions &opts) {
  bool help = false;
  std::string error;
  bool parsed = parseProfilerOptions(argc, argv, opts, help, error);
  if (parsed && help) {
    std::fputs(profilerUsage(), stdout);
    return 0;
  }
  // Without a GPU the run is a skip (77), before its arguments are judged.
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
  return std::nullopt;
}

/// Where and when the measurements are taken, and how often each repeats.
Measurements startMeasurements(const ProfilerOptions &opts) {
  Measurements m;
  m.when = utcNow();
  m.host = hostName();
  m.software = cudaVersions();
  m.repeats = opts.repeats;
  m.warmup = opts.warmup;
  return m;
}

/// The ranks of this run: one per GPU under mpirun where NCCL was built,
/// else this process alone.
struct Ranks {
  int rank = 0;
  bool ncclAvailable = false;
#ifdef MIST_PROFILE_NCCL
  std::unique_ptr<mist::rt::MpiRuntime> mpi;
  std::unique_ptr<mist::rt::MpiCommunicator> world;
  NodeLayout layout;
#endif

  void barrier() {
#ifdef MIST_PROFILE_NCCL
    if (world)
      world->barrier();
#endif
  }

  /// Reports `what` and ends the run (the whole job under mpirun).
  [[noreturn]] void fatal(const std::string &what) {
    std::fprintf(stderr, "mist-profile: rank %d: %s\n", rank, what.c_str());
#ifdef MIST_PROFILE_NCCL
    if (world)
      mist::rt::abortJob("mist-profile: " + what);
#endif
    std::exit(1);
  }
};

/// Joins the other ranks under mpirun; without NCCL only rank 0 goes on and
/// measures its GPU alone. False on a rank that stops here.
bool joinRanks([[maybe_unused]] int argc, [[maybe_unused]] char **argv, Ranks &r, Measurements &m) {
#ifdef MIST_PROFILE_NCCL
  if (launcherRanks() > 1) {
    r.mpi = std::make_unique<mist::rt::MpiRuntime>(argc, argv);
    r.world = mist::rt::MpiCommunicator::world();
    mist::rt::NcclCommunicator::selectLocalDevice(*r.world);
    r.layout = nodeLayout(*r.world);
    r.rank = r.world->rank();
    m.ranks = r.layout.ranks;
    m.nodes = r.layout.nodes;
    m.ranksPerNode = r.layout.ranksPerNode;
    m.host = r.layout.host;
    r.ncclAvailable = true;
  }
#else
  if (launcherRanks() > 1) {
    if (launcherRank() != 0)
      return false;
    m.ncclSkipped = "mist-profile was built without mistrtCommNccl (NCCL), so it runs one rank";
    std::fprintf(stderr, "mist-profile: %s\n", m.ncclSkipped.c_str());
  }
#endif
  if (m.ranks == 1 && m.ncclSkipped.empty())
    m.ncclSkipped = "one rank (run one rank per GPU under mpirun to measure them)";
  return true;
}

/// (c) host links: every rank copies at once; the slowest GPU's figures.
void measureHostLinksOnAllRanks(const ProfilerOptions &opts, [[maybe_unused]] Ranks &r,
                                Measurements &m) {
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  HostLinks links = measureHostLinks(size_t(1) << 30, opts.warmup, opts.repeats, stream);
  cudaStreamDestroy(stream);
#ifdef MIST_PROFILE_NCCL
  if (r.world) {
    links.h2dGBs = -r.world->allReduceMax(-links.h2dGBs);
    links.d2hGBs = -r.world->allReduceMax(-links.d2hGBs);
    links.latencyUs = r.world->allReduceMax(links.latencyUs);
  }
#endif
  m.h2dGBs = links.h2dGBs;
  m.d2hGBs = links.d2hGBs;
  m.hostLatencyUs = links.latencyUs;
  m.hostWhat = "pinned 1 GiB copies, " +
               std::string(m.ranks > 1 ? "all ranks at once, the slowest" : "one GPU") + ": " +
               fmt("%.1f", m.h2dGBs) + " / " + fmt("%.1f", m.d2hGBs) + " GB/s";
  if (r.rank == 0)
    std::fprintf(stderr, "mist-profile: host to device %.1f GB/s, device to host %.1f GB/s\n",
                 m.h2dGBs, m.d2hGBs);
}

/// (e) collectives and p2p, with 2+ ranks (NCCL builds only).
void measureCollectives([[maybe_unused]] const ProfilerOptions &opts, [[maybe_unused]] Ranks &r,
                        [[maybe_unused]] Measurements &m) {
#ifdef MIST_PROFILE_NCCL
  if (!r.world || r.world->size() <= 1)
    return;
  LinkFigures n = measureNccl(*r.world, r.layout, opts.warmup, opts.repeats);
  m.collectives = n.collectives;
  m.collectivesHow = n.how;
  m.p2pIntraGBs = n.p2pIntraGBs;
  m.p2pInterGBs = n.p2pInterGBs;
  m.p2pLatencyUs = n.p2pLatencyUs;
  if (r.rank == 0)
    for (const mist::CollectiveLink &e : n.collectives)
      std::fprintf(stderr,
                   "mist-profile: all-gather %d node(s) x %d GPU(s): %.1f GB/s busbw, "
                   "%.1f us\n",
                   e.nodes, e.gpusPerNode, e.busGBs, e.latencyUs);
#endif
}

/// Rank 0: the cluster file from the measurements, the base and the flags.
void writeCluster(const Measurements &m, const std::optional<mist::Cluster> &base,
                  const ProfilerOptions &opts, Ranks &r) {
  AssembledCluster out;
  std::string error;
  if (!assembleCluster(m, base, opts, out, error))
    r.fatal(error);
  for (const std::string &w : out.warnings)
    std::fprintf(stderr, "mist-profile: warning: %s\n", w.c_str());
  std::ofstream file(opts.out);
  mist::writeClusterYaml(out.figures, out.comment, file);
  file.close();
  if (!file)
    r.fatal("cannot write '" + opts.out + "'");
  std::fprintf(stderr, "mist-profile: wrote %s (%zu measured ops, %zu not timed)\n",
               opts.out.c_str(), m.ops.size(), m.notTimed.size());
}

} // namespace

int main(int argc, char **argv) {
  ProfilerOptions opts;
  if (std::optional<int> status = startUp(argc, argv, opts))
    return *status;
  std::optional<mist::Cluster> base;
  std::vector<ShapeEntry> shapes;
  std::string error;
  if (!readProfileInputs(opts, base, shapes, error)) {
    std::fprintf(stderr, "mist-profile: %s\n", error.c_str());
    return 2;
  }

  Measurements m = startMeasurements(opts);
  Ranks r;
  if (!joinRanks(argc, argv, r, m))
    return 0; // rank 0 measures its GPU alone
  if (!checkAssemblyInputs(base, opts, m.ranks, m.nodes, m.ranksPerNode, r.ncclAvailable, error)) {
    if (r.rank == 0)
      std::fprintf(stderr, "mist-profile: %s\n", error.c_str());
    return 2;
  }

  try {
    if (r.rank == 0)
      measureDevice(opts, shapes, m);
    r.barrier();
    measureHostLinksOnAllRanks(opts, r, m);
    measureCollectives(opts, r, m);
  } catch (const GpuError &e) {
    r.fatal(e.what());
  }
  if (r.rank == 0)
    writeCluster(m, base, opts, r);
  return 0;
}
