//===- CommTest.cpp - MpiCommunicator and ProcessGroups on 4 CPU ranks ----===//
/// \file
/// Runs under `mpirun -np 4`: every rank runs every test, in the same order,
/// so the collectives inside them match up. Rank 0 prints GoogleTest's usual
/// output, every rank its failures and a one-line summary; when any rank has
/// a failure, every rank exits non-zero, and so does mpirun. A fatal
/// assertion (ASSERT_*) aborts the whole job at once: its rank leaves the
/// test early and the others would wait for it in the next collective.
//===----------------------------------------------------------------------===//
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/ProcessGroups.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

using namespace mist::rt;

namespace {

MpiCommunicator *theWorld = nullptr;
MpiCommunicator &world() { return *theWorld; }

constexpr int ranksNeeded = 4;

/// Lowers maxElementsPerCall for a scope, so small buffers take the chunked
/// paths that real buffers take only past 2^28 elements.
class ChunkLimit {
public:
  ChunkLimit(MpiCommunicator &comm, size_t limit) : comm(comm), saved(comm.maxElementsPerCall()) {
    comm.setMaxElementsPerCall(limit);
  }
  ~ChunkLimit() { comm.setMaxElementsPerCall(saved); }

private:
  MpiCommunicator &comm;
  size_t saved;
};

const size_t defaultLimit = MpiCommunicator::defaultMaxElementsPerCall;
/// The chunk limits each collective is tried under: unchunked, and chunked
/// with limits below the group size (one element per call), between, and above.
const std::vector<size_t> chunkLimits{defaultLimit, 3, 7, 64};
/// Sizes that are not a multiple of anything convenient (1009 is prime).
const std::vector<size_t> sizes{0, 1, 5, 37, 1009};

std::string traceOf(size_t limit, size_t n) {
  return "chunk limit " + std::to_string(limit) + ", n " + std::to_string(n);
}

/// How many elements differ from `expected(i)`; reported as one number
/// instead of thousands of failures.
template <class Expected> size_t mismatches(const std::vector<float> &v, Expected expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i)
    wrong += v[i] != expected(i);
  return wrong;
}

TEST(MpiCommunicator, WorldHasFourRanks) {
  EXPECT_EQ(world().size(), ranksNeeded);
  EXPECT_GE(world().rank(), 0);
  EXPECT_LT(world().rank(), ranksNeeded);
}

TEST(MpiCommunicator, AllReduceSum) {
  int r = world().rank();
  // Small integers and halves: every partial sum is exact, so any order of
  // summation gives exactly the expected value.
  auto input = [&](size_t i) { return float(r + 1) + float(i % 13) * 0.5f; };
  auto sum = [](size_t i) { return 10.f + 4.f * float(i % 13) * 0.5f; };
  for (size_t limit : chunkLimits) {
    ChunkLimit scoped(world(), limit);
    std::vector<size_t> ns = sizes;
    if (limit >= 64)
      ns.push_back(1000003); // big enough for Open MPI's large-message algorithms
    for (size_t n : ns) {
      SCOPED_TRACE(traceOf(limit, n));
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i)
        v[i] = input(i);
      world().allReduceSum(v.data(), n);
      EXPECT_EQ(mismatches(v, sum), 0u);
    }
  }
}

TEST(MpiCommunicator, AllGather) {
  int r = world().rank();
  for (size_t limit : chunkLimits) {
    ChunkLimit scoped(world(), limit);
    for (size_t n : sizes) {
      SCOPED_TRACE(traceOf(limit, n));
      std::vector<float> in(n), out(ranksNeeded * n, -1.f);
      for (size_t i = 0; i < n; ++i)
        in[i] = float(r * 10000 + i);
      world().allGather(in.data(), out.data(), n);
      EXPECT_EQ(mismatches(out, [&](size_t j) { return float((j / n) * 10000 + j % n); }), 0u);
    }
  }
}

TEST(MpiCommunicator, ReduceScatterSum) {
  int r = world().rank();
  for (size_t limit : chunkLimits) {
    ChunkLimit scoped(world(), limit);
    for (size_t n : sizes) {
      SCOPED_TRACE(traceOf(limit, n));
      std::vector<float> in(ranksNeeded * n), out(n, -1.f);
      for (size_t j = 0; j < in.size(); ++j)
        in[j] = float(r + 1) + float(j % 7);
      world().reduceScatterSum(in.data(), out.data(), n);
      EXPECT_EQ(mismatches(out, [&](size_t i) { return 10.f + 4.f * float((r * n + i) % 7); }), 0u);
    }
  }
}

TEST(MpiCommunicator, Broadcast) {
  int r = world().rank();
  for (size_t limit : chunkLimits) {
    ChunkLimit scoped(world(), limit);
    for (int root : {0, 2}) {
      for (size_t n : sizes) {
        SCOPED_TRACE(traceOf(limit, n) + ", root " + std::to_string(root));
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i)
          v[i] = r == root ? float(i) * 0.25f + float(root) : -1.f;
        world().broadcast(v.data(), n, root);
        EXPECT_EQ(mismatches(v, [&](size_t i) { return float(i) * 0.25f + float(root); }), 0u);
      }
    }
  }
}

/// Each rank sends to the next and receives from the previous. Even ranks
/// send first and odd ranks receive first, so the ring cannot deadlock even
/// when MPI_Send waits for its receiver (large messages).
void ringExchange(const std::vector<float> &mine, std::vector<float> &fromPrevious, int tag) {
  int r = world().rank(), n = world().size();
  int next = (r + 1) % n, previous = (r + n - 1) % n;
  size_t bytes = mine.size() * sizeof(float);
  if (r % 2 == 0) {
    world().send(mine.data(), bytes, next, tag);
    world().recv(fromPrevious.data(), bytes, previous, tag);
  } else {
    world().recv(fromPrevious.data(), bytes, previous, tag);
    world().send(mine.data(), bytes, next, tag);
  }
}

TEST(MpiCommunicator, SendRecvRing) {
  int r = world().rank();
  int previous = (r + ranksNeeded - 1) % ranksNeeded;
  for (size_t limit : chunkLimits) {
    ChunkLimit scoped(world(), limit);
    for (size_t n : {size_t(0), size_t(1), size_t(1009), size_t(limit >= 64 ? 300007 : 101)}) {
      SCOPED_TRACE(traceOf(limit, n));
      std::vector<float> mine(n), got(n, -1.f);
      for (size_t i = 0; i < n; ++i)
        mine[i] = float(r * 1000000 + i);
      ringExchange(mine, got, /*tag=*/int(n % 1000));
      EXPECT_EQ(mismatches(got, [&](size_t i) { return float(previous * 1000000 + i); }), 0u);
    }
  }
}

TEST(MpiCommunicator, ChunkLimitIsClampedToWhatMpiTakes) {
  ChunkLimit scoped(world(), SIZE_MAX);
  EXPECT_EQ(world().maxElementsPerCall(), size_t(INT_MAX));
  ChunkLimit none(world(), 0);
  EXPECT_EQ(world().maxElementsPerCall(), 1u);
  world().setMaxElementsPerCall(SIZE_MAX);
  // send/recv's byte chunk stays an int too (INT_MAX floats would not).
  int r = world().rank();
  std::vector<float> mine(1009, float(r)), got(1009, -1.f);
  ringExchange(mine, got, /*tag=*/7);
  EXPECT_EQ(got[1008], float((r + ranksNeeded - 1) % ranksNeeded));
}

TEST(MpiCommunicator, SendRecvKeepsOrderPerTag) {
  // Two messages per tag, received with the tags swapped: each tag's
  // messages arrive in the order they were sent.
  int r = world().rank();
  if (r == 0) {
    for (int k = 0; k < 2; ++k)
      for (int tag : {5, 6}) {
        int value = tag * 10 + k;
        world().send(&value, sizeof value, 3, tag);
      }
  } else if (r == 3) {
    for (int tag : {6, 5})
      for (int k = 0; k < 2; ++k) {
        int value = -1;
        world().recv(&value, sizeof value, 0, tag);
        EXPECT_EQ(value, tag * 10 + k);
      }
  }
  world().barrier();
}

TEST(MpiCommunicator, AllReduceIsBitwiseIdenticalOnEveryRank) {
  int r = world().rank();
  for (size_t limit : {defaultLimit, size_t(1000)}) {
    ChunkLimit scoped(world(), limit);
    for (size_t n : {size_t(1), size_t(13), size_t(1009), size_t(100003), size_t(1000003)}) {
      SCOPED_TRACE(traceOf(limit, n));
      // Values over six orders of magnitude and both signs: the sum's
      // rounding depends on the order of summation.
      std::mt19937 rng(1234 + r);
      std::normal_distribution<float> normal;
      std::uniform_real_distribution<float> exponent(-3.f, 3.f);
      std::vector<float> input(n);
      for (float &x : input)
        x = normal(rng) * std::pow(10.f, exponent(rng));

      std::vector<float> sum = input;
      world().allReduceSum(sum.data(), n);

      // The same bits on every rank...
      std::vector<float> everyRanks(ranksNeeded * n);
      world().allGather(sum.data(), everyRanks.data(), n);
      for (int other = 0; other < ranksNeeded; ++other)
        EXPECT_EQ(std::memcmp(everyRanks.data() + other * n, sum.data(), n * sizeof(float)), 0)
            << "rank " << r << " and rank " << other << " differ";

      // ...the same bits again on the same input...
      std::vector<float> again = input;
      world().allReduceSum(again.data(), n);
      EXPECT_EQ(std::memcmp(again.data(), sum.data(), n * sizeof(float)), 0);

      // ...and the right sum, within fp32 rounding of 3 additions.
      std::vector<float> inputs(ranksNeeded * n);
      world().allGather(input.data(), inputs.data(), n);
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) {
        double exact = 0, magnitude = 0;
        for (int k = 0; k < ranksNeeded; ++k) {
          exact += inputs[k * n + i];
          magnitude += std::fabs(inputs[k * n + i]);
        }
        wrong += std::fabs(sum[i] - exact) > 4 * 6e-8 * magnitude;
      }
      EXPECT_EQ(wrong, 0u);
    }
  }
}

TEST(MpiCommunicator, ScalarReductions) {
  int r = world().rank();
  EXPECT_EQ(world().allReduceMax(r * 1.5 - 2.0), 2.5);
  EXPECT_EQ(world().allReduceMax(-double(r) - 0.5), -0.5);
  EXPECT_EQ(world().allReduceMax(r == 2 ? INFINITY : 1.0), INFINITY);
  EXPECT_EQ(world().allReduceSumDouble(r * 1.5 - 2.0), 1.0);
  // Beyond fp32's precision: the scalars are summed as doubles.
  EXPECT_EQ(world().allReduceSumDouble(1e15 + r), 4e15 + 6);
  world().barrier();
}

TEST(MpiCommunicator, SplitByColorAndKey) {
  int r = world().rank();
  // Even ranks form a group ordered by descending world rank; odd ranks opt out.
  std::unique_ptr<Communicator> evens = world().split(r % 2 == 0 ? 7 : -1, -r);
  if (r % 2 == 1) {
    EXPECT_EQ(evens, nullptr);
  } else {
    ASSERT_NE(evens, nullptr);
    EXPECT_EQ(evens->size(), 2);
    EXPECT_EQ(evens->rank(), r == 2 ? 0 : 1);
    float v = float(r);
    evens->allReduceSum(&v, 1);
    EXPECT_EQ(v, 2.f);
    // A sub-communicator's p2p ranks are its own.
    int peer = 1 - evens->rank(), got = -1;
    if (evens->rank() == 0) {
      evens->send(&r, sizeof r, peer, 0);
      evens->recv(&got, sizeof got, peer, 0);
    } else {
      evens->recv(&got, sizeof got, peer, 0);
      evens->send(&r, sizeof r, peer, 0);
    }
    EXPECT_EQ(got, 2 - r);
  }
  // Everyone in one group, and groups of one.
  std::unique_ptr<Communicator> all = world().split(0, r);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->size(), ranksNeeded);
  EXPECT_EQ(all->rank(), r);
  std::unique_ptr<Communicator> alone = world().split(r, 0);
  ASSERT_NE(alone, nullptr);
  EXPECT_EQ(alone->size(), 1);
  float v = 3.f;
  alone->allReduceSum(&v, 1);
  EXPECT_EQ(v, 3.f);
}

/// Stage 0: dp 1 x tp 2 on world ranks 0-1; stage 1: dp 2 x tp 1 on 2-3.
const std::vector<StageShape> twoStagePlan{{2, 1, 2}, {2, 2, 1}};

RankLayout twoStageLayout() {
  std::string error;
  std::optional<RankLayout> layout =
      RankLayout::build(twoStagePlan, world().size(), world().rank(), error);
  if (!layout)
    abortJob("two-stage layout: " + error); // the same on every rank
  return *layout;
}

TEST(ProcessGroups, TwoStagePlan) {
  ProcessGroups groups(world(), twoStageLayout());
  const RankLayout &l = groups.layout();
  int r = world().rank();
  EXPECT_EQ(&groups.pipeline(), &world());

  EXPECT_EQ(groups.tp().size(), r < 2 ? 2 : 1);
  EXPECT_EQ(groups.dp().size(), r < 2 ? 1 : 2);
  EXPECT_EQ(groups.tp().rank(), l.tpRank);
  EXPECT_EQ(groups.dp().rank(), l.dpRank);
  EXPECT_EQ(l.tpRank, r < 2 ? r : 0);
  EXPECT_EQ(l.dpRank, r < 2 ? 0 : r - 2);

  // Each group's members, seen through the group itself.
  float me = float(r);
  std::vector<float> tpMembers(groups.tp().size()), dpMembers(groups.dp().size());
  groups.tp().allGather(&me, tpMembers.data(), 1);
  groups.dp().allGather(&me, dpMembers.data(), 1);
  EXPECT_EQ(tpMembers, std::vector<float>(l.tpGroup.begin(), l.tpGroup.end()));
  EXPECT_EQ(dpMembers, std::vector<float>(l.dpGroup.begin(), l.dpGroup.end()));
  EXPECT_EQ(l.tpGroup, r < 2 ? (std::vector<int>{0, 1}) : std::vector<int>{r});
  EXPECT_EQ(l.dpGroup, r < 2 ? std::vector<int>{r} : (std::vector<int>{2, 3}));

  float tpSum = me, dpSum = me;
  groups.tp().allReduceSum(&tpSum, 1);
  groups.dp().allReduceSum(&dpSum, 1);
  EXPECT_EQ(tpSum, r < 2 ? 1.f : me);
  EXPECT_EQ(dpSum, r < 2 ? me : 5.f);
}

TEST(ProcessGroups, RejectsAnotherWorldsLayout) {
  std::string error;
  std::optional<RankLayout> eightRanks =
      RankLayout::build({{4, 2, 2}, {4, 4, 1}}, 8, world().rank(), error);
  ASSERT_TRUE(eightRanks) << error;
  EXPECT_THROW({ ProcessGroups groups(world(), *eightRanks); }, std::invalid_argument);
}

/// Runs a re-slice with blocking p2p over the pipeline communicator, each
/// rank taking its transfers in list order. `held` holds this rank's samples
/// (`width` floats each) when it is in `from`; returns what it received
/// when it is in `to`, sample by sample in its own range.
std::vector<float> runReslice(ProcessGroups &groups, int from, int to, int64_t microBatch,
                              const std::vector<float> &held, size_t width) {
  const RankLayout &l = groups.layout();
  int dp = l.stages[l.stage].dp;
  SampleRange mine = samplesOfDpRank(l.dpRank, dp, microBatch);
  std::vector<float> received(l.stage == to ? mine.size() * width : 0, -1.f);
  for (const Transfer &t : reslice(l, from, to, microBatch)) {
    size_t bytes = t.rows.size() * width * sizeof(float);
    if (t.from == l.myWorldRank)
      groups.pipeline().send(held.data() + (t.rows.begin - mine.begin) * width, bytes, t.to, 1);
    if (t.to == l.myWorldRank)
      groups.pipeline().recv(received.data() + (t.rows.begin - mine.begin) * width, bytes, t.from,
                             1);
  }
  return received;
}

TEST(ProcessGroups, ResliceActivationsAndGradientsBetweenStages) {
  ProcessGroups groups(world(), twoStageLayout());
  const RankLayout &l = groups.layout();
  const int64_t microBatch = 6;
  const size_t width = 3;
  auto value = [](int64_t sample, size_t k, float direction) {
    return direction * float(sample * 100 + int64_t(k));
  };
  auto samplesHere = [&](float direction) {
    SampleRange mine = samplesOfDpRank(l.dpRank, l.stages[l.stage].dp, microBatch);
    std::vector<float> v;
    for (int64_t s = mine.begin; s < mine.end; ++s)
      for (size_t k = 0; k < width; ++k)
        v.push_back(value(s, k, direction));
    return v;
  };

  // Forward: stage 0 (one dp rank, replicated over tp) to stage 1 (dp 2).
  std::vector<float> activations = runReslice(groups, 0, 1, microBatch, samplesHere(1.f), width);
  if (l.stage == 1) {
    EXPECT_EQ(activations, samplesHere(1.f));
  }
  // Backward: stage 1's gradients to both tp ranks of stage 0.
  std::vector<float> gradients = runReslice(groups, 1, 0, microBatch, samplesHere(-1.f), width);
  if (l.stage == 0) {
    EXPECT_EQ(gradients, samplesHere(-1.f));
  }
}

// Deliberate failures, run only by the ctest tests that check a failing
// rank fails the job (--gtest_also_run_disabled_tests).
TEST(InjectedFailure, DISABLED_ExpectFailsOnRankTwo) {
  EXPECT_NE(world().rank(), 2) << "deliberate non-fatal failure";
  world().barrier(); // the job goes on; rank 2 exits non-zero at the end
}

TEST(InjectedFailure, DISABLED_AssertFailsOnRankTwo) {
  ASSERT_NE(world().rank(), 2) << "deliberate fatal failure";
  world().barrier(); // rank 2 never comes: without the abort, a hang
}

/// Names the rank on every failure and aborts the job on a fatal one.
class RankFailureListener : public testing::EmptyTestEventListener {
public:
  explicit RankFailureListener(bool printFailures) : printFailures(printFailures) {}

  // Remembered here: UnitTest::current_test_info() would deadlock inside
  // OnTestPartResult (GoogleTest holds its lock while reporting).
  void OnTestStart(const testing::TestInfo &test) override {
    name = std::string(test.test_suite_name()) + "." + test.name();
  }

  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (!result.failed())
      return;
    if (printFailures) {
      std::printf("rank %d: %s:%d: failure in %s\n%s\n", world().rank(),
                  result.file_name() ? result.file_name() : "?", result.line_number(), name.c_str(),
                  result.message());
      std::fflush(stdout);
    }
    if (result.fatally_failed())
      abortJob("fatal assertion failed in " + name +
               "; the other ranks would wait for this one in its next collective");
  }

private:
  bool printFailures;
  std::string name = "(outside a test)";
};

} // namespace

int main(int argc, char **argv) {
  int status = 0;
  {
    MpiRuntime mpi(argc, argv);
    testing::InitGoogleTest(&argc, argv);
    std::unique_ptr<MpiCommunicator> worldComm = MpiCommunicator::world();
    theWorld = worldComm.get();
    int rank = world().rank();
    if (world().size() != ranksNeeded)
      abortJob("CommTest needs " + std::to_string(ranksNeeded) + " ranks (mpirun -np " +
               std::to_string(ranksNeeded) + "), not " + std::to_string(world().size()));

    // Rank 0 keeps GoogleTest's printer; the others print only failures.
    testing::TestEventListeners &listeners = testing::UnitTest::GetInstance()->listeners();
    if (rank != 0)
      delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailureListener(/*printFailures=*/rank != 0));

    status = RUN_ALL_TESTS();

    const testing::UnitTest &unit = *testing::UnitTest::GetInstance();
    std::printf("CommTest rank %d/%d: %d tests, %d passed, %d failed\n", rank, world().size(),
                unit.test_to_run_count(), unit.successful_test_count(), unit.failed_test_count());
    std::fflush(stdout);
    double failingRanks = world().allReduceSumDouble(status != 0 ? 1 : 0);
    if (rank == 0)
      std::printf("CommTest: %d of %d ranks failed\n", int(failingRanks), world().size());
    // Every rank exits non-zero when any rank failed: one verdict per job.
    if (failingRanks > 0)
      status = 1;
    theWorld = nullptr;
  }
  return status;
}
