//===- ProcessGroups.h - A rank's tp, dp and pipeline communicators -------===//
/// \file
/// The communicators one rank uses to run its stage of the plan, built from
/// the world communicator and the RankLayout (runtime/comm/RankLayout.h, for
/// the layout and the re-slicing of micro-batches between stages):
/// - tp: the stage's tensor-parallel group of this rank (activations'
///   all-reduces, vocabulary-parallel loss), ranked by tpRank;
/// - dp: the ranks of the stage holding the same tp shard (gradient
///   all-reduce or ZeRO reduce-scatter / all-gather), ranked by dpRank;
/// - pipeline: the world itself, since re-slicing between stages of
///   different dp and tp talks to arbitrary world ranks (Transfer::from/to
///   are world ranks).
/// Groups of one rank are real communicators of size 1, so the trainer has
/// no special case for tp = 1 or dp = 1.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/comm/RankLayout.h"
#include <memory>

namespace mist::rt {

class ProcessGroups {
public:
  /// Collective over `world`: every rank constructs its ProcessGroups at the
  /// same point, with a layout built from the same stages. Throws
  /// std::invalid_argument, before any communication, when `layout` is not
  /// this rank's layout in this world (left uncaught, MpiRuntime turns it
  /// into abortJob, so the other ranks are not left waiting).
  ProcessGroups(Communicator &world, const RankLayout &layout);

  const RankLayout &layout() const { return rankLayout; }
  Communicator &tp() { return *tpGroup; }
  Communicator &dp() { return *dpGroup; }
  Communicator &pipeline() { return world; }

private:
  RankLayout rankLayout;
  Communicator &world;
  std::unique_ptr<Communicator> tpGroup, dpGroup;
};

} // namespace mist::rt
