//===- LrSchedule.cpp - The learning rate of each step --------------------===//
#include "runtime/trainer/LrSchedule.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mist::rt {

namespace {

/// Shortest text that reads back as the same float.
std::string floatText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(v));
  return buf;
}

std::string shortText(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}

bool readFloat(const std::string &text, float &out) {
  char *end = nullptr;
  out = std::strtof(text.c_str(), &end);
  return !text.empty() && end && !*end && std::isfinite(out);
}

bool readWhole(const std::string &text, int &out) {
  auto [e, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && e == text.data() + text.size() && out >= 0;
}

} // namespace

const char *nameOf(LrDecay d) {
  switch (d) {
  case LrDecay::Cosine:
    return "cosine";
  case LrDecay::Linear:
    return "linear";
  case LrDecay::Constant:
    return "constant";
  case LrDecay::Wsd:
    return "wsd";
  }
  return "?";
}

std::optional<LrDecay> lrDecayNamed(const std::string &name) {
  for (LrDecay d : {LrDecay::Cosine, LrDecay::Linear, LrDecay::Constant, LrDecay::Wsd})
    if (name == nameOf(d))
      return d;
  return std::nullopt;
}

float LrSchedule::at(int step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return lr * float(step) / float(warmupSteps);
  if (totalSteps <= warmupSteps || decay == LrDecay::Constant)
    return lr;
  // Past the schedule's end (a resumed run trained longer) the lr stays at
  // its floor.
  const int span = totalSteps - warmupSteps, into = std::min(step - warmupSteps, span);
  if (decay == LrDecay::Cosine && minLr < 0) // the default: the operations of the runs
    // before schedules were recorded, bit for bit
    return lr * float(0.1 + 0.45 * (1 + std::cos(3.141592653589793 * into / span)));
  const double floor = minLr < 0 ? 0.1 * double(lr) : double(minLr);
  double left = 0; // how much of the way from lr down to the floor is left
  if (decay == LrDecay::Cosine) {
    left = 0.5 * (1 + std::cos(3.141592653589793 * into / span));
  } else if (decay == LrDecay::Linear) {
    left = 1 - double(into) / span;
  } else { // wsd: stable, then a linear decay over the last decayFraction of the span
    const int decaySteps = std::max(1, int(std::lround(decayFraction * span)));
    const int stable = span - decaySteps;
    left = into <= stable ? 1 : 1 - double(into - stable) / decaySteps;
  }
  return float(floor + (double(lr) - floor) * left);
}

std::string LrSchedule::str() const {
  std::string s = "lr " + shortText(lr) + ", warmup " + std::to_string(warmupSteps) + ", " +
                  std::to_string(totalSteps) + " steps";
  if (decay == LrDecay::Cosine && minLr < 0)
    return s; // the default: cosine to a tenth of lr
  if (decay == LrDecay::Constant)
    return s + ", constant";
  s += std::string(", ") + nameOf(decay);
  if (decay == LrDecay::Wsd)
    s += " (decaying over the last " + shortText(decayFraction) + ")";
  return s + " to " + (minLr < 0 ? shortText(lr * 0.1f) : shortText(minLr));
}

void LrSchedule::toMetadata(std::map<std::string, std::string> &meta) const {
  meta["lr"] = floatText(lr);
  meta["warmup_steps"] = std::to_string(warmupSteps);
  meta["schedule_steps"] = std::to_string(totalSteps);
  meta["lr_decay"] = nameOf(decay);
  meta["min_lr"] = minLr < 0 ? "lr/10" : floatText(minLr);
  meta["decay_fraction"] = floatText(decayFraction);
}

std::optional<LrSchedule> LrSchedule::fromMetadata(const std::map<std::string, std::string> &meta,
                                                   std::string &error) {
  auto get = [&](const char *key) -> const std::string * {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string *lr = get("lr"), *warmup = get("warmup_steps"), *total = get("schedule_steps");
  if (!lr || !warmup || !total)
    return std::nullopt;
  LrSchedule s;
  bool ok = readFloat(*lr, s.lr) && s.lr >= 0 && readWhole(*warmup, s.warmupSteps) &&
            readWhole(*total, s.totalSteps);
  // Checkpoints written before decay styles were recorded decay by cosine to lr/10.
  if (const std::string *decay = get("lr_decay")) {
    auto d = lrDecayNamed(*decay);
    ok = ok && d;
    s.decay = d.value_or(LrDecay::Cosine);
  }
  if (const std::string *minLr = get("min_lr"); minLr && *minLr != "lr/10")
    ok = ok && readFloat(*minLr, s.minLr) && s.minLr >= 0;
  if (const std::string *fraction = get("decay_fraction"))
    ok = ok && readFloat(*fraction, s.decayFraction) && s.decayFraction > 0 && s.decayFraction <= 1;
  if (!ok) {
    error = "its learning-rate schedule (";
    for (const char *key :
         {"lr", "warmup_steps", "schedule_steps", "lr_decay", "min_lr", "decay_fraction"})
      if (const std::string *v = get(key))
        error += std::string(error.back() == '(' ? "" : ", ") + key + " '" + *v + "'";
    error += ") does not read back";
    return std::nullopt;
  }
  if (s.totalSteps == 0) // a checkpoint of the initial weights (--steps 0) schedules nothing
    return std::nullopt;
  return s;
}

} // namespace mist::rt
