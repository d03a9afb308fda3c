//===- HostCluster.cpp - The `host` preset fitted to this machine ---------===//
#include "yaml/HostCluster.h"

#include <algorithm>
#include <sched.h>
#include <thread>
#include <unistd.h>

using namespace mist;

namespace {

/// The cores this process may run on (its affinity mask, as a launcher may
/// have narrowed it), else the machine's.
int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

double physicalMemoryGiB() {
  const long pages = sysconf(_SC_PHYS_PAGES), pageBytes = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && pageBytes > 0 ? double(pages) * double(pageBytes) / double(1ull << 30) : 0;
}

} // namespace

void mist::fitHostCluster(Cluster &c) {
  const int cores = usableCores();
  c.nodes = 1;
  c.gpusPerNode = cores;
  if (const double memory = physicalMemoryGiB(); memory > 0)
    c.device.memoryGiB = memory / cores;
  // The measured one-node group stands for a group of all the cores.
  std::vector<CollectiveLink> inside;
  for (CollectiveLink l : c.collectives)
    if (l.nodes == 1 && cores >= 2) {
      l.gpusPerNode = cores;
      inside.push_back(l);
      break;
    }
  c.collectives = inside;
}
