//===- MpiCommunicator.h - Communicator over MPI, MPI lifetime, aborting --===//
/// \file
/// The MPI implementation of Communicator (CPU ranks; on GPUs MPI only
/// bootstraps), MpiRuntime for MPI_Init/MPI_Finalize, and abortJob, the one
/// way a rank gives up.
///
/// Determinism: the MPI standard strongly recommends that a reduction give
/// the same result whenever it is applied to the same arguments in the same
/// order, and Open MPI's all-reduce algorithms give the same bits on every
/// member: each element's sum is either computed once and then copied, or
/// computed from the same two operands on both sides of an exchange (IEEE
/// addition is commutative). The algorithm depends only on the group size
/// and the count, so a run is also reproducible. CommTest checks the
/// all-reduce bit for bit across ranks. Chunking (below) cuts at fixed
/// offsets, so it keeps both properties.
///
/// Errors: every communicator uses MPI_ERRORS_RETURN and every return code
/// is checked; a failure becomes abortJob with MPI's error string, so a
/// broken job stops within seconds instead of hanging or going on wrong.
///
/// Threads: MPI is initialised with MPI_THREAD_FUNNELED; only the thread
/// that created MpiRuntime may call a Communicator.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include <list>
#include <memory>
#include <mpi.h>
#include <string>
#include <vector>

namespace mist::rt {

/// Prints `mistrt: rank R: <why>` to stderr (R is the world rank, `?` before
/// MpiRuntime) and stops every process of the job with MPI_Abort (exits the
/// process when MPI is not running). Call it from the thread that runs MPI.
[[noreturn]] void abortJob(const std::string &why);

/// For a failure every member of `group` found together (they gathered the
/// same facts and reached the same verdict): every member prints `why` (so
/// each rank's own output, `srun -o %t`, says why the job ended), then
/// rank 0 stops the job while the others wait to be stopped.
[[noreturn]] void abortJobTogether(Communicator &group, const std::string &why);

/// Owns MPI's lifetime: MPI_Init_thread(FUNNELED) on construction,
/// MPI_Finalize on destruction. Create one at the top of main, before any
/// Communicator, and let it outlive them all; one per process. It also
/// turns an uncaught exception into abortJob (std::set_terminate).
class MpiRuntime {
public:
  MpiRuntime(int &argc, char **&argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime &) = delete;
  MpiRuntime &operator=(const MpiRuntime &) = delete;
  /// Whether MPI lets several threads call it at once (MPI_THREAD_MULTIPLE).
  bool threadsConcurrent() const { return threadMultiple; }

private:
  bool threadMultiple = false;
};

class MpiCommunicator final : public Communicator {
public:
  /// All processes of the job (MPI_COMM_WORLD).
  static std::unique_ptr<MpiCommunicator> world();
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  int rank() const override { return myRank; }
  int size() const override { return groupSize; }
  using Communicator::allGather;
  using Communicator::allReduceSum;
  using Communicator::broadcast;
  using Communicator::reduceScatterSum;
  void allReduceSum(void *data, size_t n, DType type) override;
  void allGather(const void *in, void *out, size_t nPerRank, DType type) override;
  void reduceScatterSum(const void *in, void *out, size_t nPerRank, DType type) override;
  void broadcast(void *data, size_t n, int root, DType type) override;
  void send(const void *data, size_t bytes, int peer, int tag) override;
  void recv(void *data, size_t bytes, int peer, int tag) override;
  void postSend(const void *data, size_t bytes, int peer, int tag) override;
  void waitSends() override;
  double allReduceMax(double v) override;
  double allReduceSumDouble(double v) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  /// Every member's `mine`, in rank order (host names, per-rank verdicts).
  /// Collective over the group.
  std::vector<std::string> allGatherText(const std::string &mine);
  /// The name of the host this process runs on (MPI_Get_processor_name).
  static std::string hostName();

  MPI_Comm handle() const { return comm; }
  /// This process's rank among the group's processes on its node (which
  /// GPU of the node it drives). Collective over the group.
  int localRank() const;

  /// The most elements (or, for send/recv, 4-byte units) one MPI call
  /// moves; larger buffers go in chunks of at most this. MPI counts are
  /// `int`, and transports have had bugs past 2 GiB, so the default is
  /// 2^28 elements (1 GiB): far above any call where chunking would cost
  /// time. Tests lower it to exercise the chunked paths on small buffers.
  /// Must be the same on every member; communicators made by split inherit it.
  void setMaxElementsPerCall(size_t n);
  size_t maxElementsPerCall() const { return maxPerCall; }

  static constexpr size_t defaultMaxElementsPerCall = size_t(1) << 28;

private:
  MpiCommunicator(MPI_Comm comm, bool owned, size_t maxPerCall);
  /// send/recv's chunk: the same payload as a collective's, within an int.
  size_t maxBytesPerCall() const;

  MPI_Comm comm;
  bool owned; ///< freed on destruction (everything but MPI_COMM_WORLD)
  int myRank = 0, groupSize = 1;
  size_t maxPerCall;
  /// postSend's copies and their requests, kept until waitSends.
  struct PendingSend {
    std::vector<char> bytes;
    std::vector<MPI_Request> requests;
  };
  std::list<PendingSend> pending;
};

} // namespace mist::rt
