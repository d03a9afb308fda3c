//===- Streams.cpp - Stream names -----------------------------------------===//
#include "format/Streams.h"

using namespace mist;

const char *mist::streamName(Stream s) {
  switch (s) {
  case Stream::Compute:
    return "compute";
  case Stream::G2G:
    return "g2g";
  case Stream::H2D:
    return "h2d";
  case Stream::D2H:
    return "d2h";
  }
  return "?";
}

std::optional<Stream> mist::parseStreamName(std::string_view name) {
  for (unsigned i = 0; i < numStreams; ++i)
    if (name == streamName(static_cast<Stream>(i)))
      return static_cast<Stream>(i);
  return std::nullopt;
}

const char *mist::streamLabel(Stream s) {
  switch (s) {
  case Stream::Compute:
    return "compute";
  case Stream::G2G:
    return "gpu<->gpu";
  case Stream::H2D:
    return "host->gpu";
  case Stream::D2H:
    return "gpu->host";
  }
  return "?";
}
