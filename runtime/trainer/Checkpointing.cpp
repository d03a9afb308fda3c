//===- Checkpointing.cpp - Saving and resuming training -------------------===//
#include "runtime/trainer/Checkpointing.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/MpiCommunicator.h"
#include <charconv>
#include <cstdio>
#include <iterator>
#include <map>

namespace mist::rt {

namespace {

constexpr int checkpointTag = 30002;
constexpr const char *formatName = "mistrt-checkpoint-1";

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

} // namespace

int64_t checkpointBytes(const TrainerSpec &spec) {
  int64_t bytes = 0;
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const StageSpec &stage = spec.stages[s];
    for (size_t p = 0; p < stage.params.size(); ++p)
      if (savedBy(spec, s, stage.params[p]))
        bytes += copiesOf(stage, p) * elementsOf(stage.params[p]) *
                 int64_t(std::size(allTensors) * sizeof(float));
  }
  return bytes;
}

void saveCheckpoint(const std::string &path, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed) {
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
                                          {"seed", std::to_string(seed)}};
  if (auto error = writeSafetensors(path, tensors, meta))
    abortJob("cannot write the checkpoint: " + *error);
  std::printf("checkpoint of step %d written to %s\n", step, path.c_str());
}

int loadCheckpoint(const std::string &path, const TrainerSpec &spec, const StageSpec &stage,
                   ParameterStore &store) {
  std::string error;
  auto ckpt = readSafetensors(path, error);
  if (!ckpt)
    abortJob(error);
  auto meta = [&](const char *key) -> std::string {
    auto it = ckpt->metadata.find(key);
    if (it == ckpt->metadata.end())
      abortJob(path + ": not a mistrt checkpoint (no '" + key + "' in its metadata)");
    return it->second;
  };
  if (meta("format") != formatName)
    abortJob(path + ": checkpoint format '" + meta("format") + "', this trainer reads '" +
             formatName + "'");
  if (meta("model") != spec.model)
    abortJob(path + ": a checkpoint of '" + meta("model") + "', not of '" + spec.model + "'");
  const std::string stepText = meta("step");
  int step = -1;
  auto [end, ec] = std::from_chars(stepText.data(), stepText.data() + stepText.size(), step);
  if (ec != std::errc() || end != stepText.data() + stepText.size() || step < 0)
    abortJob(path + ": step '" + stepText + "' in its metadata is not a whole number >= 0");
  for (size_t p = 0; p < stage.params.size(); ++p)
    for (int l = 0; l < copiesOf(stage, p); ++l)
      for (ParamTensor what : allTensors) {
        const std::string name = tensorName(stage, p, l) + suffixOf(what);
        const TensorData *t = ckpt->find(name);
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
  return step;
}

} // namespace mist::rt
