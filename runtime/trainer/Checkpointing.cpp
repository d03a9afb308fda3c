//===- Checkpointing.cpp - Saving and resuming training -------------------===//
#include "runtime/trainer/Checkpointing.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/checkpoint/TensorHash.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/trainer/Hash.h"
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <set>

namespace mist::rt {

namespace {

constexpr int checkpointTag = 30002;
constexpr const char *legacyFormat = legacyCheckpointFormat;
constexpr const char *modelFormat = modelFileFormat;
constexpr const char *optimizerFormat = optimizerFileFormat;

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
  return "layers." + std::to_string(stage.globalLayer(l)) + "." + rest;
}

int copiesOf(const StageSpec &stage, size_t p) {
  return stage.buffers[size_t(stage.params[p].buffer)].layer ? stage.layers : 1;
}

int modelLayers(const TrainerSpec &spec) {
  int layers = 0;
  for (const StageSpec &stage : spec.stages)
    layers += stage.layers;
  return layers;
}

namespace {

/// Every tensor name of the whole model's checkpoint (every stage's).
std::set<std::string, std::less<>> modelTensorNames(const TrainerSpec &spec) {
  std::set<std::string, std::less<>> names;
  for (const StageSpec &stage : spec.stages)
    for (size_t p = 0; p < stage.params.size(); ++p)
      for (int l = 0; l < copiesOf(stage, p); ++l)
        for (ParamTensor what : allTensors)
          names.insert(tensorName(stage, p, l) + suffixOf(what));
  return names;
}

/// The layer count the names of a checkpoint's layer tensors imply (the
/// largest N of "layers.N." plus one), or 0.
int layersNamedIn(const SafetensorsFile &file) {
  int layers = 0;
  for (const TensorData &t : file.tensors) {
    if (t.name.rfind("layers.", 0) != 0)
      continue;
    int n = 0;
    auto [end, ec] = std::from_chars(t.name.data() + 7, t.name.data() + t.name.size(), n);
    if (ec == std::errc() && end < t.name.data() + t.name.size() && *end == '.')
      layers = std::max(layers, n + 1);
  }
  return layers;
}

} // namespace

std::string structureProblem(const SafetensorsFile &file, const TrainerSpec &spec,
                             const std::string &path) {
  const int ours = modelLayers(spec);
  auto recorded = file.metadata.find("layers");
  const int theirs =
      recorded != file.metadata.end() ? std::atoi(recorded->second.c_str()) : layersNamedIn(file);
  if (theirs != 0 && theirs != ours)
    return path + ": a checkpoint of " + std::to_string(theirs) + " layers of '" + spec.model +
           "'; this model has " + std::to_string(ours) +
           " (a model of the same name with another shape)";
  const std::set<std::string, std::less<>> names = modelTensorNames(spec);
  std::vector<std::string> extra;
  for (const TensorData &t : file.tensors)
    if (!names.count(t.name))
      extra.push_back(t.name);
  if (!extra.empty())
    return path + ": holds " + std::to_string(extra.size()) + " tensor" +
           (extra.size() == 1 ? "" : "s") + " this model does not have ('" + extra.front() + "'" +
           (extra.size() > 1 ? ", ..." : "") + "): a checkpoint of another model of the same name";
  return "";
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

bool isOptimizerTensor(const std::string &name) {
  return name.ends_with(".master") || name.ends_with(".adam_m") || name.ends_with(".adam_v");
}

/// The weights as the run held them: bf16 runs store BF16 (exactly: the run
/// held these values in bf16), fp32 runs F32.
TensorData inRunDtype(const TensorData &t, DType weights) {
  if (weights != DType::BF16)
    return t;
  TensorData half{t.name, "BF16", t.shape, std::vector<std::byte>(t.bytes.size() / 2)};
  for (size_t i = 0; i < t.bytes.size() / 4; ++i) {
    float v;
    std::memcpy(&v, &t.bytes[4 * i], 4);
    const uint16_t b = toBf16(v);
    std::memcpy(&half.bytes[2 * i], &b, 2);
  }
  return half;
}

/// A BF16 weight read back as the F32 values the run held.
void widenToF32(TensorData &t) {
  if (t.dtype != "BF16")
    return;
  std::vector<std::byte> wide(t.bytes.size() * 2);
  for (size_t i = 0; i < t.bytes.size() / 2; ++i) {
    uint16_t b;
    std::memcpy(&b, &t.bytes[2 * i], 2);
    const float v = fromBf16(b);
    std::memcpy(&wide[4 * i], &v, 4);
  }
  t.dtype = "F32";
  t.bytes = std::move(wide);
}

/// Writes one file of the pair with its own tensors' hashes and format.
void writePart(const std::string &path, const std::vector<TensorData> &tensors,
               std::map<std::string, std::string> meta, const char *format) {
  meta["format"] = format;
  for (const TensorData &t : tensors)
    meta[tensorHashPrefix + t.name] = hex(tensorHash(t));
  if (auto error = writeSafetensors(path, tensors, meta))
    abortJob("cannot write the checkpoint: " + *error);
}

bool exists(const std::string &path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

} // namespace

int64_t checkpointBytes(const TrainerSpec &spec) {
  int64_t bytes = 0;
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const StageSpec &stage = spec.stages[s];
    for (size_t p = 0; p < stage.params.size(); ++p)
      if (savedBy(spec, s, stage.params[p]))
        // Three fp32 tensors in optimizer.safetensors, the weights in
        // model.safetensors twice while a save replaces it (counted at fp32).
        bytes += copiesOf(stage, p) * elementsOf(stage.params[p]) * int64_t(5 * sizeof(float));
  }
  return bytes;
}

void saveCheckpoint(const std::string &dir, const TrainerSpec &spec, ProcessGroups &groups,
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
            values = store.values.full(p, l, what); // collective over the stage
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
  std::vector<TensorData> weights, optimizer;
  for (TensorData &t : tensors) {
    if (isOptimizerTensor(t.name))
      optimizer.push_back(std::move(t));
    else
      weights.push_back(inRunDtype(t, spec.weightDtype));
  }
  // Both files say which save they belong to: a resume takes them only as a pair.
  std::map<std::string, std::string> meta{{"model", spec.model},
                                          {"layers", std::to_string(modelLayers(spec))},
                                          {"step", std::to_string(step)},
                                          {"seed", std::to_string(seed)},
                                          {"weights_dtype", nameOf(spec.weightDtype)},
                                          {"grad_dtype", nameOf(spec.gradDtype)}};
  schedule.toMetadata(meta);
  meta.insert(run.begin(), run.end());
  const uint64_t weightsHash = contentHash(weights); // every weight byte: hashed once
  meta["save"] = hex(splitmix64(weightsHash ^ contentHash(optimizer)));
  meta["content_hash"] = hex(weightsHash); // the model file's own identity
  // The model file goes in beside the old one, the optimizer file replaces
  // its predecessor, then the model file does: a save cut short anywhere
  // leaves a pair that resumes (model.safetensors.next is the new model file
  // until the last rename). Each write is itself atomic.
  const std::string modelPath = dir + "/" + checkpointModelFile,
                    nextPath = modelPath + checkpointNextSuffix;
  writePart(nextPath, weights, meta, modelFormat);
  meta.erase("content_hash");
  writePart(dir + "/" + checkpointOptimizerFile, optimizer, meta, optimizerFormat);
  std::error_code ec;
  std::filesystem::rename(nextPath, modelPath, ec);
  if (ec)
    abortJob("cannot put " + nextPath + " in place of " + modelPath + ": " + ec.message());
  // A folder resumed from an older trainer's single file no longer needs it.
  std::filesystem::remove(dir + "/" + checkpointLegacyFile, ec);
  std::printf("checkpoint of step %d written to %s (%s, %s)\n", step, dir.c_str(),
              checkpointModelFile, checkpointOptimizerFile);
}

namespace {

/// Reads `path`'s tensors that `wanted` names and checks its metadata and
/// the tensors' hashes; returns the error, or "".
std::string readPart(const std::string &path, const TrainerSpec &spec, const char *format,
                     const std::function<bool(std::string_view)> &wanted,
                     std::optional<SafetensorsFile> &file) {
  std::string error;
  file = readSafetensors(path, error, wanted);
  if (!file)
    return error;
  const auto &metadata = file->metadata;
  for (const char *key : {"format", "model", "step"})
    if (!metadata.count(key))
      return path + ": not a mistrt checkpoint (no '" + key + "' in its metadata)";
  if (metadata.at("format") != format)
    return path + ": checkpoint format '" + metadata.at("format") + "', this trainer reads '" +
           format + "' here";
  if (metadata.at("model") != spec.model)
    return path + ": a checkpoint of '" + metadata.at("model") + "', not of '" + spec.model + "'";
  // Each tensor read against the hash recorded when it was written (older
  // checkpoints have none).
  return recordedHashProblem(*file, path);
}

std::string describe(const std::map<std::string, std::string> &metadata) {
  std::string described;
  for (const auto &[key, value] : metadata)
    described += key + "=" + value + "\n";
  return described;
}

} // namespace

OpenedCheckpoint openCheckpoint(const std::string &dir, const TrainerSpec &spec,
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
  const std::string optimizerPath = dir + "/" + checkpointOptimizerFile,
                    modelPath = dir + "/" + checkpointModelFile,
                    legacyPath = dir + "/" + checkpointLegacyFile;
  std::string error;
  if (!exists(optimizerPath) && exists(legacyPath)) { // an older trainer's single file
    opened.source = legacyPath;
    error = readPart(legacyPath, spec, legacyFormat, wanted, opened.file);
    if (!error.empty())
      return fail(error);
    opened.identity = fnv1a(describe(opened.file->metadata));
  } else {
    opened.source = modelPath + " and " + checkpointOptimizerFile;
    std::optional<SafetensorsFile> optimizer;
    error = readPart(optimizerPath, spec, optimizerFormat, wanted, optimizer);
    if (!error.empty())
      return fail(exists(optimizerPath) || exists(modelPath)
                      ? error
                      : "no checkpoint in " + dir + " (" + checkpointModelFile + " and " +
                            checkpointOptimizerFile + ")");
    const std::string save =
        optimizer->metadata.count("save") ? optimizer->metadata.at("save") : "";
    // The model file of the same save: in place, or still under its
    // temporary name when the save was cut short before its last rename.
    for (const std::string &path : {modelPath, modelPath + checkpointNextSuffix}) {
      if (!exists(path))
        continue;
      error = readPart(path, spec, modelFormat, wanted, opened.file);
      if (!error.empty())
        return fail(error);
      if (opened.file->metadata.count("save") && opened.file->metadata.at("save") == save)
        break;
      opened.file.reset();
    }
    if (!opened.file)
      return fail(optimizerPath + " (step " + optimizer->metadata.at("step") + ") has no " +
                  checkpointModelFile + " of the same save beside it");
    opened.identity = fnv1a(describe(opened.file->metadata) + describe(optimizer->metadata));
    for (TensorData &t : opened.file->tensors)
      widenToF32(t);
    for (TensorData &t : optimizer->tensors)
      opened.file->tensors.push_back(std::move(t));
    std::sort(opened.file->tensors.begin(), opened.file->tensors.end(),
              [](const TensorData &a, const TensorData &b) { return a.name < b.name; });
  }
  if (std::string problem = structureProblem(*opened.file, spec, opened.source); !problem.empty())
    return fail(problem);
  const auto &metadata = opened.file->metadata;
  const std::string &stepText = metadata.at("step");
  auto [end, ec] = std::from_chars(stepText.data(), stepText.data() + stepText.size(), opened.step);
  if (ec != std::errc() || end != stepText.data() + stepText.size() || opened.step < 0)
    return fail(opened.source + ": step '" + stepText +
                "' in its metadata is not a whole number >= 0");
  opened.schedule = LrSchedule::fromMetadata(metadata, error);
  if (!error.empty())
    return fail(opened.source + ": " + error);
  return opened;
}

OpenedCheckpoint openInitialWeights(const std::string &dir, const TrainerSpec &spec,
                                    const StageSpec &stage) {
  OpenedCheckpoint opened;
  auto fail = [&](std::string why) {
    opened.file.reset();
    opened.error = std::move(why);
    return std::move(opened);
  };
  std::set<std::string, std::less<>> weights, masters;
  for (size_t p = 0; p < stage.params.size(); ++p)
    for (int l = 0; l < copiesOf(stage, p); ++l) {
      weights.insert(tensorName(stage, p, l));
      masters.insert(tensorName(stage, p, l) + suffixOf(ParamTensor::Master));
    }
  const std::string modelPath = dir + "/" + checkpointModelFile,
                    optimizerPath = dir + "/" + checkpointOptimizerFile;
  opened.source = modelPath;
  if (!exists(modelPath))
    return fail("--init-from: no " + std::string(checkpointModelFile) + " in " + dir +
                " (a trainer checkpoint folder, or what mistc --emit=checkpoint --from-hf wrote)");
  std::string error = readPart(
      modelPath, spec, modelFormat, [&](std::string_view n) { return weights.count(n) > 0; },
      opened.file);
  if (!error.empty())
    return fail(error);
  if (std::string problem = structureProblem(*opened.file, spec, modelPath); !problem.empty())
    return fail(problem);
  opened.identity = fnv1a(describe(opened.file->metadata));
  for (TensorData &t : opened.file->tensors)
    widenToF32(t);
  // The masters of the same save are the exact fp32 values of a bf16 run.
  std::optional<SafetensorsFile> optimizer;
  const auto save = opened.file->metadata.find("save");
  if (save != opened.file->metadata.end() && exists(optimizerPath) &&
      readPart(
          optimizerPath, spec, optimizerFormat,
          [&](std::string_view n) { return masters.count(n) > 0; }, optimizer)
          .empty() &&
      optimizer->metadata.count("save") && optimizer->metadata.at("save") == save->second) {
    opened.source += " and " + std::string(checkpointOptimizerFile) + "'s masters";
    opened.identity ^= fnv1a(describe(optimizer->metadata));
    for (TensorData &t : optimizer->tensors)
      opened.file->tensors.push_back(std::move(t));
    std::sort(opened.file->tensors.begin(), opened.file->tensors.end(),
              [](const TensorData &a, const TensorData &b) { return a.name < b.name; });
  }
  return opened;
}

void loadInitialWeights(const OpenedCheckpoint &ckpt, const StageSpec &stage,
                        ParameterStore &store) {
  const std::string &path = ckpt.source;
  for (size_t p = 0; p < stage.params.size(); ++p)
    for (int l = 0; l < copiesOf(stage, p); ++l) {
      const std::string name = tensorName(stage, p, l);
      const TensorData *master = ckpt.file->find(name + suffixOf(ParamTensor::Master));
      const TensorData *t = master ? master : ckpt.file->find(name);
      if (!t)
        abortJob(path + ": no tensor '" + name + "'");
      if (t->shape != stage.params[p].shape)
        abortJob(path + ": tensor '" + t->name + "' has shape " + shapeText(t->shape) +
                 ", the model's is " + shapeText(stage.params[p].shape));
      auto values = t->floats();
      if (!values || int64_t(values->size()) != elementsOf(stage.params[p]))
        abortJob(path + ": tensor '" + t->name + "' is " + t->dtype +
                 " or has another size than the model's F32 " + shapeText(stage.params[p].shape));
      store.values.load(p, l, ParamTensor::Master, *values); // the weights follow
      const std::vector<float> zeros(values->size(), 0.0f);
      store.values.load(p, l, ParamTensor::AdamM, zeros);
      store.values.load(p, l, ParamTensor::AdamV, zeros);
    }
}

void loadCheckpoint(const OpenedCheckpoint &ckpt, const StageSpec &stage, ParameterStore &store) {
  const std::string &path = ckpt.source;
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
        store.values.load(p, l, what, *values);
      }
}

} // namespace mist::rt
