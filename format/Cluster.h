//===- Cluster.h - A cluster description: nodes, device, links ------------===//
/// \file
/// A cluster as read from its YAML description (yaml/ClusterLoader,
/// schema in docs/cluster.md): nodes of identical GPUs, a device profile
/// (roofline figures plus optional measured op times), collective bandwidth
/// by how a group spans the machine, point-to-point and host<->device links,
/// and slow-down factors for streams that run at the same time.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Streams.h"

#include <algorithm>
#include <cmath>

#include <array>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mist {

/// Whether a cluster argument (--cluster, a train section's `cluster`) names
/// a YAML file rather than a preset: it has a '/' or a .yaml/.yml suffix.
inline bool namesClusterFile(std::string_view c) {
  auto endsWith = [&](std::string_view tail) {
    return c.size() >= tail.size() && c.substr(c.size() - tail.size()) == tail;
  };
  return c.find('/') != std::string_view::npos || endsWith(".yaml") || endsWith(".yml");
}

/// A measured op time: op name (IR spelling, e.g. "linear", "attention_grad")
/// and a shape key (the op's operand shapes, comma-separated dims, e.g.
/// "8192x2048,2048x6144") mapped to seconds.
struct MeasuredOp {
  std::string op;
  std::string shape;
  double seconds = 0;
};

struct DeviceProfile {
  std::string name;               ///< e.g. "NVIDIA H100 80GB HBM3"
  double memoryGiB = 0;           ///< device memory
  double usableFraction = 0.92;   ///< part of it a plan may use (runtime, fragmentation)
  double peakTflops = 0;          ///< dense bf16 tensor-core peak
  double matmulEfficiency = 0.75; ///< roofline fallback: achieved / peak for matmuls
  double memBandwidthGBs = 0;     ///< device memory bandwidth
  double memEfficiency = 0.8;     ///< achieved / peak for memory-bound ops
  std::vector<MeasuredOp> measured;
  /// Dense TF32 tensor-core peak: the rate of the GEMMs of fp32 training
  /// (`dtype = f32`), which the trainer runs as TF32; 0 means half the bf16
  /// peak, the ratio of A100, H100 and L4.
  /// (Last, so that brace initializers of the fields above stay valid.)
  double tf32PeakTflops = 0;
  /// The shape model of GEMMs and attention (perfmodel/KernelTimes.h);
  /// sms = 0 keeps the flat roofline (matmulEfficiency for every GEMM).
  int sms = 0;
  std::array<int, 2> gemmTile{256, 128}; ///< output tile (rows x columns) of a large GEMM
  /// Flash attention: the efficiency a full wave reaches for an infinitely
  /// long key range, and the key length at which it reaches half of that
  /// (the per-block fixed work: loading queries, writing outputs).
  double attentionFwdEfficiency = 0, attentionFwdHalfKeys = 0;
  double attentionBwdEfficiency = 0, attentionBwdHalfKeys = 0;
  double matmulPeakTflops(bool fp32Training) const {
    if (!fp32Training)
      return peakTflops;
    return tf32PeakTflops > 0 ? tf32PeakTflops : peakTflops / 2;
  }
};

/// Bandwidth of a collective over a group laid out as `nodes` x `gpusPerNode`.
struct CollectiveLink {
  int nodes = 1;
  int gpusPerNode = 1;
  double busGBs = 0;    ///< algorithm bandwidth of an all-gather (bus bandwidth, GB/s)
  double latencyUs = 0; ///< fixed cost per collective
};

/// The links collectives run over, for the alpha-beta model
/// (perfmodel/Collectives.h): NVLink/NVSwitch inside a node, NICs across.
/// Absent (nvlinkGBs = 0) when the cluster gives a measured table only.
struct NetworkLinks {
  double nvlinkGBs = 0;          ///< per GPU, one direction
  double nvlinkEfficiency = 0.8; ///< achieved ring bus bandwidth / nvlinkGBs
  int nicsPerNode = 0;
  double nicGBs = 0;          ///< per NIC, one direction
  double nicEfficiency = 0.9; ///< achieved / nicGBs
  bool present() const { return nvlinkGBs > 0; }
};

/// Slow-down of each stream when exactly the streams in `streams` are busy.
struct InterferenceEntry {
  std::vector<Stream> streams;
  std::vector<double> factors; ///< one per stream in `streams`, >= 1
};

struct Cluster {
  std::string name;
  int nodes = 1;
  int gpusPerNode = 1;
  DeviceProfile device;
  std::vector<CollectiveLink> collectives; ///< measured; an entry overrides the network model
  NetworkLinks network;
  double p2pIntraGBs = 0, p2pInterGBs = 0, p2pLatencyUs = 0;
  double h2dGBs = 0, d2hGBs = 0, hostLatencyUs = 0; ///< pinned host memory, per GPU
  double hostMemoryGiB = 0; ///< host memory per node offloading may pin; 0: unlimited
  /// GPUs whose host copies share one link (a PCIe switch's uplink): with
  /// all of them copying at once each gets h2dGBs / gpusPerHostLink.
  int gpusPerHostLink = 1;
  std::vector<InterferenceEntry> interference;
  bool tpAcrossNodes = false; ///< whether a tp group may span nodes

  int totalGpus() const { return nodes * gpusPerNode; }
  double usableBytes() const { return device.memoryGiB * device.usableFraction * (1ull << 30); }
  /// Each GPU's share of the node's pinnable host memory.
  /// Host-link bandwidth per GPU while every GPU of the node copies.
  double sharedH2dGBs() const { return h2dGBs / std::min(gpusPerHostLink, gpusPerNode); }
  double sharedD2hGBs() const { return d2hGBs / std::min(gpusPerHostLink, gpusPerNode); }
  double hostBytesPerGpu() const {
    return hostMemoryGiB > 0 ? hostMemoryGiB * (1ull << 30) / gpusPerNode : INFINITY;
  }
};

} // namespace mist
