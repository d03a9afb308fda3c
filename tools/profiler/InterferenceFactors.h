//===- InterferenceFactors.h - The interference table from unit timings --===//
/// \file
/// What the GPU profiler (Interference.cpp: CUDA streams) and the CPU one
/// (CpuInterference.cpp: threads) share: which sets of streams are measured,
/// and how a set's run becomes its entry of the table (docs/cluster.md,
/// "Interference model").
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

#include <utility>
#include <vector>

namespace mist::profiler {

/// The sets of 2 to 4 of the four streams (bit s: stream s of
/// format/Streams.h), by size, then in stream order: the pairs, the triples,
/// all four.
std::vector<unsigned> interferenceStreamSets();

/// Each unit a stream ran during a set's run: begin and end, in seconds from
/// one start. A stream outside the set has none.
using UnitTimes = std::vector<std::pair<double, double>>;

/// Each stream's factor: the mean time of its units that lie wholly inside
/// the window where every stream of the set is busy (all of them when none
/// does), over its time alone, at least 1, to three decimals.
InterferenceEntry interferenceFactors(const UnitTimes (&units)[4], const double alone[4]);

} // namespace mist::profiler
