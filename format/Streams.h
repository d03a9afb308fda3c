//===- Streams.h - The four streams of a pipeline stage -------------------===//
/// \file
/// Every piece of a stage's work runs on one of four streams: compute,
/// GPU<->GPU collectives and pipeline messages (g2g), host->GPU copies (h2d)
/// and GPU->host copies (d2h). The performance model prices them, cluster
/// files name them, the schedule places steps on them and the runtime
/// executes on them; this is the one definition all of those share.
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string_view>

namespace mist {

enum class Stream { Compute = 0, G2G = 1, H2D = 2, D2H = 3 };
constexpr unsigned numStreams = 4;

/// The stream's name in cluster files and trace rows: "compute", "g2g",
/// "h2d", "d2h".
const char *streamName(Stream s);
/// The inverse of streamName; nullopt for any other spelling.
std::optional<Stream> parseStreamName(std::string_view name);
/// A reader's label for listings: "compute", "gpu<->gpu", "host->gpu",
/// "gpu->host".
const char *streamLabel(Stream s);

} // namespace mist
