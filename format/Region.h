//===- Region.h - The three regions of a model ----------------------------===//
/// \file
/// A model is `pre` (embeddings, on the first pipeline stage), the repeated
/// `layer`, and `post` (final norm, head and loss, on the last stage). The
/// IR, the schedule and the runtime's tables all speak of these three.
//===----------------------------------------------------------------------===//
#pragma once

namespace mist {

enum class RegionKind { Pre, Layer, Post };

/// "pre", "layer", "post": the spelling of the language and the IR.
const char *regionName(RegionKind k);

} // namespace mist
