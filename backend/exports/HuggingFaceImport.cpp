//===- HuggingFaceImport.cpp - A transformers model as a trainer's weights ===//
#include "backend/exports/HuggingFaceImport.h"

#include "backend/exports/ExportProjection.h"
#include "backend/exports/HuggingFaceLayout.h"
#include "backend/exports/StagedFolder.h"
#include "runtime/checkpoint/CheckpointFormat.h"
#include "runtime/checkpoint/Json.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/checkpoint/TensorHash.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <set>
#include <sstream>

using namespace mist;
using namespace mist::hf;

namespace {

constexpr uintmax_t kMaxConfigBytes = 16u << 20; // a config.json is a few KB

/// A regular file's text, or nullopt after reporting (missing, not a
/// regular file, larger than `limit`).
std::optional<std::string> readSmallFile(const std::string &path, uintmax_t limit,
                                         DiagnosticEngine &diag) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    diag.error({},
               fmt::format("--from-hf: {} is {}", path,
                           std::filesystem::exists(path, ec) ? "not a regular file" : "not there"));
    return std::nullopt;
  }
  if (std::filesystem::file_size(path, ec) > limit) {
    diag.error({}, fmt::format("--from-hf: {} is larger than {} bytes: not a config", path, limit));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) {
    diag.error({}, fmt::format("--from-hf: cannot read {}", path));
    return std::nullopt;
  }
  return text.str();
}

std::optional<rt::JsonValue> readJsonFile(const std::string &path, DiagnosticEngine &diag) {
  auto text = readSmallFile(path, kMaxConfigBytes, diag);
  if (!text)
    return std::nullopt;
  std::string error;
  auto json = rt::parseJson(*text, error);
  if (!json || json->kind != rt::JsonValue::Kind::Object) {
    diag.error({}, fmt::format("--from-hf: {}: {}", path, json ? "not a JSON object" : error));
    return std::nullopt;
  }
  return json;
}

const rt::JsonValue *member(const rt::JsonValue &object, std::string_view key) {
  for (const auto &[k, v] : object.members)
    if (k == key)
      return &v;
  return nullptr;
}

/// config.json compared with the model: every difference is an error at
/// the model's declaration, naming the key and both values.
class ConfigCheck {
public:
  ConfigCheck(const rt::JsonValue &config, const Module &m, std::string path,
              DiagnosticEngine &diag)
      : config(config), m(m), path(std::move(path)), diag(diag) {}

  bool ok() const { return differences == 0; }

  /// The first of `keys` present (nested "a.b" allowed), or null.
  const rt::JsonValue *find(std::initializer_list<const char *> keys) const {
    for (const char *key : keys) {
      const rt::JsonValue *v = &config;
      std::string_view rest = key;
      while (v && !rest.empty()) {
        const size_t dot = rest.find('.');
        v = v->kind == rt::JsonValue::Kind::Object ? member(*v, rest.substr(0, dot)) : nullptr;
        rest = dot == std::string_view::npos ? "" : rest.substr(dot + 1);
      }
      if (v && v->kind != rt::JsonValue::Kind::Null)
        return v;
    }
    return nullptr;
  }

  /// A number at the first of `keys`, `fallback` (transformers' default)
  /// when none is there, compared with `expected` to a relative 1e-9.
  void number(std::initializer_list<const char *> keys, double expected,
              std::optional<double> fallback, const std::string &what) {
    const rt::JsonValue *v = find(keys);
    double value = fallback.value_or(NAN);
    if (v && v->kind == rt::JsonValue::Kind::Number)
      value = std::strtod(v->text.c_str(), nullptr);
    else if (v || !fallback)
      return differ(*keys.begin(), v ? "not a number" : "missing", fmtNumber(expected), what);
    if (!(std::fabs(value - expected) <= 1e-9 * std::max(1.0, std::fabs(expected))))
      differ(*keys.begin(), fmtNumber(value), fmtNumber(expected), what);
  }

  void text(std::initializer_list<const char *> keys, const std::set<std::string> &accepted,
            std::optional<std::string> fallback, const std::string &expected,
            const std::string &what) {
    const rt::JsonValue *v = find(keys);
    std::string value;
    if (v && v->kind == rt::JsonValue::Kind::String)
      value = v->text;
    else if (!v && fallback)
      value = *fallback;
    else
      return differ(*keys.begin(), v ? "not a string" : "missing", expected, what);
    if (!accepted.count(value))
      differ(*keys.begin(), '"' + value + '"', expected, what);
  }

  void boolean(const char *key, bool expected, bool fallback, const std::string &what) {
    const rt::JsonValue *v = find({key});
    const bool value = v && v->kind == rt::JsonValue::Kind::Bool ? v->boolean : fallback;
    if (v && v->kind != rt::JsonValue::Kind::Bool)
      return differ(key, "not true or false", expected ? "true" : "false", what);
    if (value != expected)
      differ(key, value ? "true" : "false", expected ? "true" : "false", what);
  }

  /// Absent or null, as the model has no counterpart.
  void absent(const char *key, const std::string &why) {
    if (const rt::JsonValue *v = find({key})) {
      diag.error(m.loc,
                 fmt::format("--from-hf: {} sets {} ({}); model '{}' {}", path, key,
                             v->kind == rt::JsonValue::Kind::String ? '"' + v->text + '"'
                                                                    : rt::describeJsonKind(v->kind),
                             m.name, why));
      ++differences;
    }
  }

private:
  static std::string fmtNumber(double v) { return fmt::format("{:g}", v); }
  void differ(const char *key, const std::string &theirs, const std::string &ours,
              const std::string &what) {
    diag.error(m.loc, fmt::format("--from-hf: {}'s {} is {}; model '{}' has {} {}", path, key,
                                  theirs, m.name, what, ours));
    ++differences;
  }

  const rt::JsonValue &config;
  const Module &m;
  std::string path;
  DiagnosticEngine &diag;
  int differences = 0;
};

/// The model's sizes the config must state.
struct ModelSizes {
  int64_t vocab = 0, hidden = 0, ffn = 0, layers = 0, heads = 0, kvHeads = 0, seqLen = 0;
};

bool checkConfig(const rt::JsonValue &config, const std::string &path, const Module &m,
                 Family family, const ModelSizes &s, const Matcher &matched,
                 DiagnosticEngine &diag) {
  ConfigCheck c(config, m, path, diag);
  const char *type = family == Family::Gpt2    ? "gpt2"
                     : family == Family::Llama ? "llama"
                                               : "gpt_neox";
  const rt::JsonValue *modelType = c.find({"model_type"});
  if (!modelType || modelType->kind != rt::JsonValue::Kind::String || modelType->text != type) {
    diag.error(m.loc, fmt::format("--from-hf: {}'s model_type is {}; model '{}' is a {} model "
                                  "({})",
                                  path, modelType ? '"' + modelType->text + '"' : "missing", m.name,
                                  type, className(family)));
    return false;
  }
  const std::string tanh = "\"gelu_new\" (tanh)", exact = "\"gelu\" (exact)";
  const std::set<std::string> tanhNames = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  c.number({"vocab_size"}, double(s.vocab), std::nullopt, "a vocabulary of");
  if (family == Family::Gpt2) {
    c.number({"n_embd"}, double(s.hidden), std::nullopt, "hidden size");
    c.number({"n_layer"}, double(s.layers), std::nullopt, "layers:");
    c.number({"n_head"}, double(s.heads), std::nullopt, "heads:");
    c.number({"n_inner"}, double(s.ffn), double(4 * s.hidden), "an MLP width of");
    c.number({"layer_norm_epsilon"}, matched.normEps, 1e-5, "norm epsilon");
    c.text({"activation_function"}, matched.exactGelu ? std::set<std::string>{"gelu"} : tanhNames,
           "gelu_new", matched.exactGelu ? exact : tanh, "activation");
    c.boolean("tie_word_embeddings", true, true, "its LM head tied:");
    if (const rt::JsonValue *p = c.find({"n_positions"});
        p && p->kind == rt::JsonValue::Kind::Number &&
        std::strtod(p->text.c_str(), nullptr) < double(s.seqLen))
      c.number({"n_positions"}, double(s.seqLen), std::nullopt, "sequences of");
  } else {
    c.number({"hidden_size"}, double(s.hidden), std::nullopt, "hidden size");
    c.number({"num_hidden_layers"}, double(s.layers), std::nullopt, "layers:");
    c.number({"num_attention_heads"}, double(s.heads), std::nullopt, "heads:");
    c.number({"intermediate_size"}, double(s.ffn), std::nullopt, "an MLP width of");
    c.number({"rope_parameters.rope_theta", "rope_theta", "rotary_emb_base"}, matched.ropeTheta,
             10000.0, "a rotary base of");
  }
  if (family == Family::Llama) {
    c.number({"num_key_value_heads"}, double(s.kvHeads), double(s.heads), "key/value heads:");
    c.number({"head_dim"}, double(s.hidden / s.heads), double(s.hidden / s.heads), "head size");
    c.number({"rms_norm_eps"}, matched.normEps, 1e-6, "norm epsilon");
    c.text({"hidden_act"}, {"silu"}, "silu", "\"silu\"", "activation");
    c.boolean("tie_word_embeddings", matched.tiedHead, false, "its LM head tied:");
    c.boolean("attention_bias", false, false, "biases on q, k, v and o:");
    c.boolean("mlp_bias", false, false, "MLP biases:");
    c.absent("rope_scaling", "scales no rotary frequencies (Llama 3.1's \"llama3\" scaling is "
                             "not in the language)");
    const rt::JsonValue *ropeType = c.find({"rope_parameters.rope_type"});
    if (ropeType && ropeType->kind == rt::JsonValue::Kind::String && ropeType->text != "default")
      c.text({"rope_parameters.rope_type"}, {"default"}, std::nullopt, "\"default\"",
             "rotary frequencies of type");
  }
  if (family == Family::GptNeox) {
    c.number({"rope_parameters.partial_rotary_factor", "rotary_pct"},
             double(matched.rotaryDim) / double(matched.headDim), 0.25, "a rotary fraction of");
    c.number({"layer_norm_eps"}, matched.normEps, 1e-5, "norm epsilon");
    c.text({"hidden_act"}, matched.exactGelu ? std::set<std::string>{"gelu"} : tanhNames, "gelu",
           matched.exactGelu ? exact : tanh, "activation");
    c.boolean("use_parallel_residual", true, true, "a parallel residual:");
    c.boolean("tie_word_embeddings", false, false, "its LM head tied:");
    c.boolean("attention_bias", true, true, "biases on q, k, v and o:");
  }
  return c.ok();
}

/// The model's weights: model.safetensors, or the shards the index names.
class HfWeights {
public:
  bool open(const std::string &dir, DiagnosticEngine &diag) {
    const std::string single = dir + "/model.safetensors", index = single + ".index.json";
    std::error_code ec;
    if (std::filesystem::exists(index, ec)) {
      auto json = readJsonFile(index, diag);
      const rt::JsonValue *map = json ? member(*json, "weight_map") : nullptr;
      if (!map || map->kind != rt::JsonValue::Kind::Object) {
        if (json)
          diag.error({}, fmt::format("--from-hf: {} has no weight_map object", index));
        return false;
      }
      for (const auto &[name, file] : map->members) {
        if (file.kind != rt::JsonValue::Kind::String || file.text.find('/') != std::string::npos) {
          diag.error({}, fmt::format("--from-hf: {}: weight_map[\"{}\"] is not a file name of the "
                                     "folder",
                                     index, name));
          return false;
        }
        fileOf[name] = dir + "/" + file.text;
      }
    } else if (std::filesystem::exists(single, ec)) {
      if (!load(single, diag))
        return false;
      for (const rt::TensorData &t : files[single].tensors)
        fileOf[t.name] = single;
    } else {
      diag.error({}, fmt::format("--from-hf: {} holds neither model.safetensors nor "
                                 "model.safetensors.index.json{}",
                                 dir,
                                 std::filesystem::exists(dir + "/pytorch_model.bin", ec)
                                     ? " (only pytorch_model.bin: save it with safetensors, "
                                       "save_pretrained(DIR, safe_serialization=True))"
                                     : ""));
      return false;
    }
    return true;
  }

  /// The tensor called `name`, or null after reporting.
  const rt::TensorData *get(const std::string &name, const std::string &dir,
                            DiagnosticEngine &diag) {
    auto f = fileOf.find(name);
    if (f == fileOf.end()) {
      diag.error({}, fmt::format("--from-hf: {} has no tensor '{}'", dir, name));
      return nullptr;
    }
    if (!files.count(f->second) && !load(f->second, diag))
      return nullptr;
    const rt::TensorData *t = files[f->second].find(name);
    if (!t)
      diag.error({}, fmt::format("--from-hf: {} has no tensor '{}' (its index says it does)",
                                 f->second, name));
    used.insert(name);
    return t;
  }

  /// Tensors never asked for, but transformers' buffers and a tied head.
  std::vector<std::string> leftOver(bool tiedHead) const {
    std::vector<std::string> left;
    for (const auto &[name, file] : fileOf) {
      const bool buffer = name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") ||
                          name.ends_with("rotary_emb.inv_freq") ||
                          name.ends_with(".attention.bias") ||
                          name.ends_with(".attention.masked_bias");
      const bool tiedCopy = tiedHead && name == "lm_head.weight";
      if (!used.count(name) && !buffer && !tiedCopy)
        left.push_back(name);
    }
    return left;
  }

private:
  bool load(const std::string &path, DiagnosticEngine &diag) {
    std::string error;
    auto file = rt::readSafetensors(path, error);
    if (!file) {
      diag.error({}, "--from-hf: " + error);
      return false;
    }
    files[path] = std::move(*file);
    return true;
  }

  std::map<std::string, std::string> fileOf; ///< tensor -> file
  std::map<std::string, rt::SafetensorsFile> files;
  std::set<std::string> used;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

} // namespace

bool mist::importHuggingFace(const Module &m, const std::string &hfDir, const std::string &outDir,
                             DiagnosticEngine &diag) {
  Matcher matcher(m, diag, "--from-hf");
  auto roles = matcher.matchLayer();
  Family family = Family::Gpt2;
  auto plan = roles ? matcher.tensors(*roles, family) : std::nullopt;
  if (!plan)
    return false;
  const ExportModel e = exportModelOf(m);
  auto shapes = checkpointShapes(m, e.layers, diag);
  if (!shapes)
    return false;
  // The sizes config.json must state, from the model's tensors.
  ModelSizes sizes{0, 0, 0, e.layers, e.heads, e.kvHeads ? e.kvHeads : e.heads, e.seqLen};
  for (const HfTensor &t : *plan) {
    const std::string ours = fmt::format(fmt::runtime(t.ourName), 0);
    if (!shapes->count(ours))
      continue;
    const std::vector<int64_t> &shape = shapes->at(ours);
    if (t.hfName.ends_with("wte.weight") || t.hfName.ends_with("embed_tokens.weight") ||
        t.hfName.ends_with("embed_in.weight")) {
      sizes.vocab = shape[0];
      sizes.hidden = shape[1];
    }
    if (t.hfName.ends_with("c_fc.weight") || t.hfName.ends_with("up_proj.weight") ||
        t.hfName.ends_with("dense_h_to_4h.weight"))
      sizes.ffn = shape[1];
  }
  const std::string configPath = hfDir + "/config.json";
  auto config = readJsonFile(configPath, diag);
  if (!config || !checkConfig(*config, configPath, m, family, sizes, matcher, diag))
    return false;

  HfWeights weights;
  if (!weights.open(hfDir, diag))
    return false;
  std::vector<rt::TensorData> out;
  // A transformers tensor's values, checked against the shape the model
  // implies; nullopt after reporting.
  auto hfValues = [&](const std::string &name,
                      const std::vector<int64_t> &expected) -> std::optional<std::vector<float>> {
    const rt::TensorData *t = weights.get(name, hfDir, diag);
    if (!t)
      return std::nullopt;
    if (t->shape != expected) {
      diag.error(m.loc, fmt::format("--from-hf: {}'s tensor '{}' has shape {}; model '{}' needs "
                                    "{} there",
                                    hfDir, name, shapeText(t->shape), m.name, shapeText(expected)));
      return std::nullopt;
    }
    auto values = valuesOf(*t);
    if (!values)
      diag.error({}, fmt::format("--from-hf: {}'s tensor '{}' is {}: F32, BF16 or F16 are read",
                                 hfDir, name, t->dtype));
    return values;
  };
  for (const HfTensor &t : *plan)
    for (int64_t l = 0; l < (t.perLayer ? e.layers : 1); ++l) {
      const std::string theirs = fmt::format(fmt::runtime(t.hfName), l);
      if (t.transform == Transform::FuseQkvPerHead) {
        std::array<std::string, 3> names;
        for (size_t k = 0; k < 3; ++k)
          names[k] = fmt::format(fmt::runtime(t.parts[k]), l);
        const std::vector<int64_t> part = shapes->at(names[0]);
        const int64_t in = part.size() == 2 ? part[0] : 1, width = part.back();
        const std::vector<int64_t> fusedShape = part.size() == 2
                                                    ? std::vector<int64_t>{3 * width, in}
                                                    : std::vector<int64_t>{3 * width};
        auto fused = hfValues(theirs, fusedShape);
        if (!fused)
          return false;
        auto parts = splitQkv(*fused, in, width, t);
        for (size_t k = 0; k < 3; ++k)
          out.push_back(rt::TensorData::fromFloats(names[k], part, parts[k]));
        continue;
      }
      const std::string ours = fmt::format(fmt::runtime(t.ourName), l);
      std::vector<int64_t> shape = shapes->at(ours), theirShape = shape;
      if (t.transform != Transform::Copy)
        std::swap(theirShape[0], theirShape[1]);
      auto values = hfValues(theirs, theirShape);
      if (!values)
        return false;
      const int64_t rows = shape.empty() ? 1 : shape[0], cols = shape.size() > 1 ? shape[1] : 1;
      out.push_back(rt::TensorData::fromFloats(ours, shape, untransformed(*values, rows, cols, t)));
    }
  if (auto left = weights.leftOver(matcher.tiedHead); !left.empty()) {
    diag.error(m.loc, fmt::format("--from-hf: {} holds {} tensor{} model '{}' has no place for "
                                  "('{}'{}): a model of another kind",
                                  hfDir, left.size(), left.size() == 1 ? "" : "s", m.name,
                                  left.front(), left.size() > 1 ? ", ..." : ""));
    return false;
  }

  // The trainer's model file: its format, the model, step 0, each tensor's hash.
  std::map<std::string, std::string> meta{
      {"format", rt::modelFileFormat},
      {"model", m.name},
      {"layers", std::to_string(e.layers)},
      {"step", "0"},
      {"weights_dtype", "f32"},
      {"source", fmt::format("Hugging Face {} in {}", className(family), hfDir)}};
  for (const rt::TensorData &t : out)
    meta[rt::tensorHashPrefix + t.name] = rt::hex(rt::tensorHash(t));
  meta["content_hash"] = rt::hex(rt::contentHash(out));
  std::string staging;
  if (!stageFolder(outDir, staging, diag))
    return false;
  StagingCleanup cleanup{staging};
  if (auto failed = rt::writeSafetensors(staging + "/" + rt::checkpointModelFile, out, meta)) {
    diag.error({}, *failed);
    return false;
  }
  if (!moveStagedFiles(staging, outDir, {rt::checkpointModelFile}, diag))
    return false;
  llvm::errs() << fmt::format("mistc: {} {} ({} tensors) written to {} as {}'s weights; "
                              "start a run from them with ./train --init-from {}\n",
                              className(family), hfDir, out.size(), outDir, m.name, outDir);
  return true;
}
