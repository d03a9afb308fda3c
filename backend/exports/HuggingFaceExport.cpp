//===- HuggingFaceExport.cpp - A trainer checkpoint as a transformers model ===//
#include "backend/exports/HuggingFaceExport.h"

#include "backend/exports/ExportProjection.h"
#include "backend/exports/HuggingFaceLayout.h"
#include "backend/exports/StagedFolder.h"
#include "backend/trainer/Lowering.h"
#include "ir/OpSemantics.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/checkpoint/TensorHash.h"
#include "runtime/device/DType.h"
#include "support/OutputFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>

using namespace mist;
using namespace mist::hf;

namespace {

/// The checkpoint at `checkpointPath` (a trainer's folder: its model file;
/// or a safetensors file) when it is of this model: its metadata names the
/// model, every tensor matches the hash recorded for it, and it holds no
/// tensor the model lacks. `source` gets the file read, `expected` every
/// tensor name of the model with its shape; nullopt after reporting.
std::optional<rt::SafetensorsFile> readCheckpointOfModel(
    const Module &m, const ExportModel &e, const std::string &checkpointPath, std::string &source,
    std::optional<std::map<std::string, std::vector<int64_t>>> &expected, DiagnosticEngine &diag) {
  std::string error;
  // A checkpoint folder: its model file holds the weights (the optimizer
  // file beside it is not needed); a file: read as it is.
  std::error_code isDir;
  source = std::filesystem::is_directory(checkpointPath, isDir)
               ? checkpointPath + "/model.safetensors"
               : checkpointPath;
  auto ckpt = rt::readSafetensors(source, error);
  if (!ckpt) {
    diag.error({}, "--checkpoint: " + error);
    return std::nullopt;
  }
  auto model = ckpt->metadata.find("model");
  if (model == ckpt->metadata.end() || model->second != m.name) {
    diag.error({}, fmt::format("--checkpoint: {} is {}, not of model '{}'", source,
                               model == ckpt->metadata.end()
                                   ? "not a trainer checkpoint (no 'model' in its metadata)"
                                   : "a checkpoint of '" + model->second + "'",
                               m.name));
    return std::nullopt;
  }
  if (std::string damaged = rt::recordedHashProblem(*ckpt, source); !damaged.empty()) {
    diag.error({}, "--checkpoint: " + damaged);
    return std::nullopt;
  }
  // The checkpoint must be of this model's shape: its layer count and every
  // tensor's shape, as the trainer's resume asks (a same-named model of
  // another size would otherwise export under this one's config).
  expected = checkpointShapes(m, e.layers, diag);
  if (!expected)
    return std::nullopt;
  for (const rt::TensorData &t : ckpt->tensors)
    if (!expected->count(t.name)) {
      diag.error({}, fmt::format("--checkpoint: {} holds '{}', which model '{}' ({} layers) does "
                                 "not have: a checkpoint of another shape of the model",
                                 source, t.name, m.name, e.layers));
      return std::nullopt;
    }
  return ckpt;
}

/// Writes `tensors` and `config` into folder `dir`: staged beside it and
/// moved in only when both files are whole, so a full disk leaves `dir` as
/// it was.
bool writeExportFolder(const std::string &dir, const std::vector<rt::TensorData> &tensors,
                       const std::string &config, DiagnosticEngine &diag) {
  std::string staging;
  if (!stageFolder(dir, staging, diag))
    return false;
  StagingCleanup cleanup{staging};
  if (auto failed =
          rt::writeSafetensors(staging + "/model.safetensors", tensors, {{"format", "pt"}})) {
    diag.error({}, *failed);
    return false;
  }
  OutputFile file(staging + "/config.json", "config.json", diag);
  if (file.failed())
    return false;
  file.os() << config;
  return file.commit() && moveStagedFiles(staging, dir, {"model.safetensors", "config.json"}, diag);
}

} // namespace

bool mist::exportHuggingFace(const Module &m, const std::string &checkpointPath,
                             const std::string &dir, DiagnosticEngine &diag) {
  Matcher matcher(m, diag, "--emit=hf");
  auto roles = matcher.matchLayer();
  Family family = Family::Gpt2;
  auto plan = roles ? matcher.tensors(*roles, family) : std::nullopt;
  if (!plan)
    return false;
  const ExportModel e = exportModelOf(m);
  std::string source;
  std::optional<std::map<std::string, std::vector<int64_t>>> expected;
  std::optional<rt::SafetensorsFile> ckpt =
      readCheckpointOfModel(m, e, checkpointPath, source, expected, diag);
  if (!ckpt)
    return false;
  std::vector<rt::TensorData> out;
  std::vector<int64_t> tableShape;
  int64_t ffn = 0, positions = e.seqLen;
  // A checkpoint tensor's values and shape, or nullopt after reporting.
  auto load = [&](const std::string &ours, const std::string &theirs)
      -> std::optional<std::pair<std::vector<float>, std::vector<int64_t>>> {
    const rt::TensorData *found = ckpt->find(ours);
    if (found && expected->count(ours) && found->shape != expected->at(ours)) {
      diag.error({}, fmt::format("--checkpoint: tensor '{}' of {} has shape [{}]; model '{}' "
                                 "has [{}]: a checkpoint of another shape of the model",
                                 ours, source, fmt::join(found->shape, ", "), m.name,
                                 fmt::join(expected->at(ours), ", ")));
      return std::nullopt;
    }
    auto values = found ? valuesOf(*found) : std::nullopt;
    if (!values) {
      diag.error({}, fmt::format("--checkpoint: {} has no F32 or BF16 tensor '{}' (for {})", source,
                                 ours, theirs));
      return std::nullopt;
    }
    return std::pair{std::move(*values), found->shape};
  };
  for (const HfTensor &t : *plan)
    for (int64_t l = 0; l < (t.perLayer ? e.layers : 1); ++l) {
      const std::string ours = fmt::format(fmt::runtime(t.ourName), l);
      const std::string theirs = fmt::format(fmt::runtime(t.hfName), l);
      std::vector<float> v;
      std::vector<int64_t> shape;
      if (t.transform == Transform::FuseQkvPerHead) {
        std::array<std::vector<float>, 3> parts;
        for (size_t k = 0; k < 3; ++k) {
          auto part = load(fmt::format(fmt::runtime(t.parts[k]), l), theirs);
          if (!part)
            return false;
          if (k > 0 && part->second != shape) {
            diag.error({}, fmt::format("--checkpoint: the q, k and v tensors of {} differ in shape",
                                       theirs));
            return false;
          }
          parts[k] = std::move(part->first);
          shape = part->second;
        }
        const int64_t in = shape.size() == 2 ? shape[0] : 1, out = shape.back();
        if (shape.empty() || shape.size() > 2 || out % t.heads != 0) {
          diag.error({},
                     fmt::format("--checkpoint: '{}' does not split into {} heads", ours, t.heads));
          return false;
        }
        v = fusedQkv(parts, in, out, t);
        shape = shape.size() == 2 ? std::vector<int64_t>{3 * out, in} : std::vector{3 * out};
      } else {
        auto loaded = load(ours, theirs);
        if (!loaded)
          return false;
        shape = loaded->second;
        const int64_t rows = shape.empty() ? 1 : shape[0], cols = shape.size() > 1 ? shape[1] : 1;
        if (t.transform != Transform::Copy && shape.size() != 2) {
          diag.error({}, fmt::format("--checkpoint: tensor '{}' is not a matrix", ours));
          return false;
        }
        if (theirs.ends_with("wte.weight") || theirs.ends_with("embed_tokens.weight") ||
            theirs.ends_with("embed_in.weight"))
          tableShape = shape;
        if (theirs.ends_with("wpe.weight"))
          positions = rows;
        if (theirs.ends_with("c_fc.weight") || theirs.ends_with("up_proj.weight") ||
            theirs.ends_with("dense_h_to_4h.weight"))
          ffn = cols;
        v = transformed(loaded->first, rows, cols, t);
        if (t.transform != Transform::Copy)
          std::swap(shape[0], shape[1]);
      }
      rt::TensorData d;
      d.name = theirs;
      d.shape = shape;
      if (m.train.dtype == DType::BF16) {
        d.dtype = "BF16";
        d.bytes = bf16Bytes(v);
      } else {
        d = rt::TensorData::fromFloats(theirs, shape, v);
      }
      out.push_back(std::move(d));
    }
  if (!writeExportFolder(dir, out, configJson(m, family, tableShape, ffn, positions, matcher),
                         diag))
    return false;
  llvm::errs() << fmt::format("mistc: {} ({} tensors, step {} of {}) written to {} as {}\n", m.name,
                              out.size(),
                              ckpt->metadata.count("step") ? ckpt->metadata.at("step") : "?",
                              checkpointPath, dir, className(family));
  return true;
}
