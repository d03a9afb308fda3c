//===- Region.cpp - Region names ------------------------------------------===//
#include "format/Region.h"

const char *mist::regionName(RegionKind k) {
  switch (k) {
  case RegionKind::Pre:
    return "pre";
  case RegionKind::Layer:
    return "layer";
  case RegionKind::Post:
    return "post";
  }
  return "?";
}
