//===- KernelTimes.cpp - GEMM waves and flash-attention efficiency --------===//
#include "perfmodel/KernelTimes.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mist;

double mist::waveEfficiency(double blocks, int sms) {
  if (blocks <= 0 || sms <= 0)
    return 1;
  double waves = std::ceil(blocks / sms);
  return blocks / (waves * sms);
}

double mist::gemmComputeSeconds(const DeviceProfile &d, double flopRate, double m, double n,
                                double k) {
  if (flopRate <= 0 || m <= 0 || n <= 0 || k <= 0)
    return 0;
  if (d.sms <= 0)
    return 2 * m * n * k / flopRate;
  const double perSm = flopRate / d.sms;
  double best = std::numeric_limits<double>::infinity();
  for (auto [tm, tn] : {std::pair{d.gemmTile[0], d.gemmTile[1]}, {d.gemmTile[1], d.gemmTile[0]}}) {
    double tiles = std::ceil(m / tm) * std::ceil(n / tn);
    double waves = std::ceil(tiles / d.sms);
    best = std::min(best, waves * 2.0 * tm * tn * k / perSm);
  }
  return best;
}

double mist::attentionEfficiency(const DeviceProfile &d, double batch, double heads, double seq,
                                 bool causal, bool backward) {
  const double peakShare = backward ? d.attentionBwdEfficiency : d.attentionFwdEfficiency;
  const double halfKeys = backward ? d.attentionBwdHalfKeys : d.attentionFwdHalfKeys;
  if (peakShare <= 0 || seq <= 0)
    return 0;
  constexpr double queriesPerBlock = 128; // FlashAttention-2's tile on A100 and H100
  const double blocks = batch * heads * std::ceil(seq / queriesPerBlock);
  const double keys = causal ? seq / 2 : seq; // a causal block sweeps half the keys on average
  return peakShare * keys / (keys + halfKeys) * waveEfficiency(blocks, d.sms);
}

double mist::scoreMatrixBytes(double batch, double heads, double seq, double elementBytes,
                              bool dropout, bool backward) {
  const double elements = batch * heads * seq * seq;
  const double passes = backward ? (dropout ? 8 : 6) : (dropout ? 6 : 4);
  const double maskBytes = dropout ? 1 : 0; // written forward, read backward
  return elements * (passes * elementBytes + maskBytes);
}
