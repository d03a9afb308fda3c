//===- Checkpointing.cpp - Saving and resuming training -------------------===//
#include "runtime/trainer/Checkpointing.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/trainer/Hash.h"
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <set>

namespace mist::rt {

namespace {

constexpr int checkpointTag = 30002;
constexpr const char *formatName = "mistrt-checkpoint-1";
constexpr const char *modelFormatName = "mistrt-model-1"; ///< the weights alone, for sharing

const ParamTensor allTensors[] = {ParamTensor::Weight, ParamTensor::Master, ParamTensor::AdamM,
                                  ParamTensor::AdamV};

const char *suffixOf(ParamTensor t) {
  switch (t) {
  case ParamTensor::Weight:
    return "";
  case ParamTensor::Master:
    return ".master";
  case ParamTensor::AdamM:
    return ".adam_m";
  case ParamTensor::AdamV:
    return ".adam_v";
  }
  return "";
}

/// The checkpoint name of copy `l` of parameter `p` of a stage.
std::string tensorName(const StageSpec &stage, size_t p, int l) {
  const ParamSpec &ps = stage.params[p];
  const std::string name = ps.name;
  if (!stage.buffers[size_t(ps.buffer)].layer)
    return name;
  const std::string rest = name.rfind("layer.", 0) == 0 ? name.substr(6) : name;
  return "layers." + std::to_string(stage.firstLayer + l) + "." + rest;
}

int copiesOf(const StageSpec &stage, size_t p) {
  return stage.buffers[size_t(stage.params[p].buffer)].layer ? stage.layers : 1;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t elementsOf(const ParamSpec &ps) {
  int64_t n = 1;
  for (int64_t d : ps.shape)
    n *= d;
  return n;
}

/// A tied weight is saved once, by the first stage.
bool savedBy(const TrainerSpec &spec, size_t s, const ParamSpec &ps) {
  return !(ps.tiedAcrossStages && s + 1 == spec.stages.size() && spec.stages.size() > 1);
}

/// A hash of every tensor's name and bytes, in name order (the order a
/// file is read back in): recorded in the metadata, so two checkpoints of
/// one step with other contents (another run, another host's copy) have
/// different identities, and a damaged file is found before it is used.
uint64_t addToHash(uint64_t h, const TensorData &t) {
  h = splitmix64(h ^ fnv1a(t.name));
  const std::byte *p = t.bytes.data();
  size_t n = t.bytes.size(), i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = splitmix64(h ^ word);
  }
  uint64_t tail = n - i;
  for (; i < n; ++i)
    tail = (tail << 8) | uint64_t(p[i]);
  return splitmix64(h ^ tail);
}

constexpr uint64_t hashStart = 0x6d69737463686b70ull; // any fixed start

uint64_t contentHash(const std::vector<TensorData> &tensors) {
  std::vector<const TensorData *> byName;
  for (const TensorData &t : tensors)
    byName.push_back(&t);
  std::sort(byName.begin(), byName.end(),
            [](const TensorData *a, const TensorData *b) { return a->name < b->name; });
  uint64_t h = hashStart;
  for (const TensorData *tensor : byName)
    h = addToHash(h, *tensor);
  return h;
}

/// A tensor's own hash, recorded as metadata `hash:<name>`: each rank
/// checks the tensors it reads without reading the others.
uint64_t tensorHash(const TensorData &t) { return addToHash(hashStart, t); }
constexpr const char *tensorHashPrefix = "hash:";

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)v);
  return text;
}

/// The folder's model.safetensors: the weights alone, in the run's dtype,
/// with the run's metadata, for sharing the trained model without its
/// optimizer state (a quarter or an eighth of the checkpoint). Resuming reads
/// latest.safetensors, which holds everything in one atomic file.
void writeModelFile(const std::string &checkpointPath, const TrainerSpec &spec,
                    const std::vector<TensorData> &tensors,
                    std::map<std::string, std::string> meta) {
  std::vector<TensorData> weights;
  for (const TensorData &t : tensors) {
    const std::string &n = t.name;
    if (n.ends_with(".master") || n.ends_with(".adam_m") || n.ends_with(".adam_v"))
      continue;
    if (spec.weightDtype != DType::BF16) {
      weights.push_back(t);
      continue;
    }
    TensorData half{t.name, "BF16", t.shape, std::vector<std::byte>(t.bytes.size() / 2)};
    for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
      float v;
      std::memcpy(&v, &t.bytes[4 * i], 4);
      const uint16_t b = toBf16(v); // exact: the run held these weights in bf16
      std::memcpy(&half.bytes[2 * i], &b, 2);
    }
    weights.push_back(std::move(half));
  }
  std::erase_if(meta, [](const auto &kv) { return kv.first.starts_with(tensorHashPrefix); });
  meta["format"] = modelFormatName;
  meta["content_hash"] = hex(contentHash(weights));
  const std::string dir = checkpointPath.substr(0, checkpointPath.find_last_of('/') + 1);
  if (auto error = writeSafetensors(dir + "model.safetensors", weights, meta))
    abortJob("cannot write the model file: " + *error);
}

} // namespace

int64_t checkpointBytes(const TrainerSpec &spec) {
  int64_t bytes = 0;
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const StageSpec &stage = spec.stages[s];
    for (size_t p = 0; p < stage.params.size(); ++p)
      if (savedBy(spec, s, stage.params[p]))
        // Four fp32 tensors in latest.safetensors, the weights again in model.safetensors.
        bytes += copiesOf(stage, p) * elementsOf(stage.params[p]) *
                 int64_t((std::size(allTensors) + 1) * sizeof(float));
  }
  return bytes;
}

void saveCheckpoint(const std::string &path, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed,
                    const LrSchedule &schedule, const std::map<std::string, std::string> &run) {
  const RankLayout &layout = groups.layout();
  Communicator &world = hostWorld;
  const int me = layout.myWorldRank;
  std::vector<TensorData> tensors;
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const StageSpec &stage = spec.stages[s];
    const int leader = layout.worldRank(int(s), 0, 0);
    const bool mine = layout.stage == int(s);
    if (!mine && me != 0)
      continue;
    for (size_t p = 0; p < stage.params.size(); ++p) {
      const ParamSpec &ps = stage.params[p];
      if (!savedBy(spec, s, ps))
        continue;
      for (int l = 0; l < copiesOf(stage, p); ++l)
        for (ParamTensor what : allTensors) {
          std::vector<float> values;
          if (mine)
            values = store.full(p, l, what); // collective over the stage
          if (me == 0 && !mine) {
            values.resize(size_t(elementsOf(ps)));
            world.recv(values.data(), values.size() * sizeof(float), leader, checkpointTag);
          } else if (me == leader && me != 0) {
            world.postSend(values.data(), values.size() * sizeof(float), 0, checkpointTag);
          }
          if (me == 0)
            tensors.push_back(
                TensorData::fromFloats(tensorName(stage, p, l) + suffixOf(what), ps.shape, values));
        }
    }
  }
  world.waitSends();
  if (me != 0)
    return;
  std::map<std::string, std::string> meta{{"format", formatName},
                                          {"model", spec.model},
                                          {"step", std::to_string(step)},
                                          {"seed", std::to_string(seed)},
                                          // The weights are stored widened to F32 (exactly);
                                          // this says what the run held them in.
                                          {"weights_dtype", nameOf(spec.weightDtype)},
                                          {"grad_dtype", nameOf(spec.gradDtype)}};
  for (const TensorData &t : tensors)
    meta[tensorHashPrefix + t.name] = hex(tensorHash(t));
  schedule.toMetadata(meta);
  meta.insert(run.begin(), run.end());
  if (auto error = writeSafetensors(path, tensors, meta))
    abortJob("cannot write the checkpoint: " + *error);
  std::printf("checkpoint of step %d written to %s\n", step, path.c_str());
  writeModelFile(path, spec, tensors, meta);
}

OpenedCheckpoint openCheckpoint(const std::string &path, const TrainerSpec &spec,
                                const StageSpec &stage) {
  OpenedCheckpoint opened;
  auto fail = [&](std::string why) {
    opened.file.reset();
    opened.error = std::move(why);
    return std::move(opened);
  };
  // Only this stage's tensors: on a large model every rank reading the whole
  // checkpoint would need its size in host memory on each rank.
  std::set<std::string, std::less<>> names;
  for (size_t p = 0; p < stage.params.size(); ++p)
    for (int l = 0; l < copiesOf(stage, p); ++l)
      for (ParamTensor what : allTensors)
        names.insert(tensorName(stage, p, l) + suffixOf(what));
  auto wanted = [&](std::string_view name) { return names.count(name) > 0; };
  opened.file = readSafetensors(path, opened.error, wanted);
  if (!opened.file)
    return fail(opened.error);
  const auto &metadata = opened.file->metadata;
  for (const char *key : {"format", "model", "step"})
    if (!metadata.count(key))
      return fail(path + ": not a mistrt checkpoint (no '" + key + "' in its metadata)");
  if (metadata.at("format") != formatName)
    return fail(path + ": checkpoint format '" + metadata.at("format") + "', this trainer reads '" +
                formatName + "'");
  if (metadata.at("model") != spec.model)
    return fail(path + ": a checkpoint of '" + metadata.at("model") + "', not of '" + spec.model +
                "'");
  const std::string &stepText = metadata.at("step");
  auto [end, ec] = std::from_chars(stepText.data(), stepText.data() + stepText.size(), opened.step);
  if (ec != std::errc() || end != stepText.data() + stepText.size() || opened.step < 0)
    return fail(path + ": step '" + stepText + "' in its metadata is not a whole number >= 0");
  std::string error;
  opened.schedule = LrSchedule::fromMetadata(metadata, error);
  if (!error.empty())
    return fail(path + ": " + error);
  // Each tensor read against the hash recorded when it was written (older
  // checkpoints have none).
  for (const TensorData &t : opened.file->tensors) {
    auto recorded = metadata.find(tensorHashPrefix + t.name);
    if (t.loaded && recorded != metadata.end() && recorded->second != hex(tensorHash(t)))
      return fail(path + ": tensor '" + t.name +
                  "' does not match the hash recorded when it was written (" + recorded->second +
                  "): a damaged or altered file");
  }
  std::string described;
  for (const auto &[key, value] : metadata)
    described += key + "=" + value + "\n";
  opened.identity = fnv1a(described);
  return opened;
}

void loadCheckpoint(const OpenedCheckpoint &ckpt, const std::string &path, const StageSpec &stage,
                    ParameterStore &store) {
  for (size_t p = 0; p < stage.params.size(); ++p)
    for (int l = 0; l < copiesOf(stage, p); ++l)
      for (ParamTensor what : allTensors) {
        const std::string name = tensorName(stage, p, l) + suffixOf(what);
        const TensorData *t = ckpt.file->find(name);
        if (!t)
          abortJob(path + ": no tensor '" + name + "'");
        // The same element count in another shape (transposed, flattened)
        // would load silently into the wrong places.
        if (t->shape != stage.params[p].shape)
          abortJob(path + ": tensor '" + name + "' has shape " + shapeText(t->shape) +
                   ", the model's is " + shapeText(stage.params[p].shape));
        auto values = t->floats();
        if (!values || int64_t(values->size()) != elementsOf(stage.params[p]))
          abortJob(path + ": tensor '" + name + "' is " + t->dtype +
                   " or has another size than the model's F32 " + shapeText(stage.params[p].shape));
        store.load(p, l, what, *values);
      }
}

} // namespace mist::rt
