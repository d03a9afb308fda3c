//===- Trainer.cpp - What an emitted train.cu hands to the runtime --------===//
#include "runtime/trainer/Trainer.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/trainer/TpContext.h"

#include "stdlib/kernels/adamw/AdamW.h"
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <sys/resource.h>

namespace mist::rt {

Frame::Frame(const std::vector<BufferSpec> &buffers, bool layerFrame) {
  floats.resize(buffers.size());
  ints.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].layer != layerFrame)
      continue;
    size_t n = static_cast<size_t>(std::max<int64_t>(buffers[i].elements, 1));
    if (buffers[i].kind == BufferKind::Ids)
      ints[i].assign(n, 0);
    else
      floats[i].assign(n, 0.f);
  }
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

struct Options {
  int steps = 10, logEvery = 1;
  uint64_t seed = 1234;
  float lr = -1; ///< < 0: the model's
  bool synthetic = true;
  std::string trace; ///< write the last step's measured timeline here
  std::string data;  ///< token file; empty: synthetic data
  std::string ckptDir;
  int ckptEvery = 0; ///< 0: only at the end when --ckpt-dir is given
  bool resume = false;
  int stopAfter = 0; ///< > 0: leave after this step as if killed (tests of --resume)
};

/// Measured intervals of the last step, for --trace.
struct TraceEvent {
  std::string name;
  double start, duration; ///< seconds from the step's start
};

bool writeTrace(const std::string &path, const std::string &model,
                const std::vector<TraceEvent> &events) {
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return false;
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  std::fprintf(f,
               "  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 0, \"args\": {\"name\": "
               "\"stage 0 (%s, measured)\"}},\n",
               model.c_str());
  std::fprintf(f, "  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 0, \"tid\": 0, \"args\": "
                  "{\"name\": \"compute\"}}");
  for (const TraceEvent &e : events)
    std::fprintf(f,
                 ",\n  {\"ph\": \"X\", \"name\": \"%s\", \"pid\": 0, \"tid\": 0, \"ts\": %.3f, "
                 "\"dur\": %.3f}",
                 e.name.c_str(), e.start * 1e6, e.duration * 1e6);
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

[[noreturn]] void usage(const char *why) {
  std::fprintf(stderr,
               "mistrt: %s\nusage: train [--steps N] [--lr X] [--seed N] [--log-every N] "
               "[--data FILE | --synthetic] [--ckpt-dir DIR [--ckpt-every N] [--resume]] "
               "[--trace FILE]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto integer = [&](const std::string &v) {
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (!end || *end || n < 0)
        usage(("not a non-negative integer: " + v).c_str());
      return n;
    };
    if (a == "--steps")
      o.steps = static_cast<int>(integer(value()));
    else if (a == "--log-every")
      o.logEvery = std::max(1, static_cast<int>(integer(value())));
    else if (a == "--seed")
      o.seed = static_cast<uint64_t>(integer(value()));
    else if (a == "--lr") {
      std::string v = value();
      char *end = nullptr;
      o.lr = std::strtof(v.c_str(), &end);
      if (!end || *end || !(o.lr > 0))
        usage(("not a positive learning rate: " + v).c_str());
    } else if (a == "--synthetic")
      o.synthetic = true;
    else if (a == "--trace")
      o.trace = value();
    else if (a == "--data") {
      o.data = value();
      o.synthetic = false;
    } else if (a == "--ckpt-dir")
      o.ckptDir = value();
    else if (a == "--ckpt-every")
      o.ckptEvery = static_cast<int>(integer(value()));
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--stop-after")
      o.stopAfter = static_cast<int>(integer(value()));
    else
      usage(("unknown flag " + a).c_str());
  }
  return o;
}

/// Sequence k of the data: a counting pattern with a per-sequence start and
/// stride, learnable (the next token follows from the last two).
void syntheticSequence(int64_t k, int seq, int vocab, int32_t *tokens, int32_t *targets) {
  uint64_t h = splitmix64(uint64_t(k) * 7919 + 17);
  int start = int(h % vocab), stride = 1 + int((h >> 20) % 7);
  for (int t = 0; t < seq; ++t) {
    tokens[t] = int32_t((start + t * stride) % vocab);
    targets[t] = int32_t((start + (t + 1) * stride) % vocab);
  }
}

} // namespace

int64_t fullIndexOf(const ParamSpec &p, int rank, int tp, int64_t local) {
  if (p.shardAxis < 0 || tp == 1)
    return local;
  int64_t inner = 1;
  for (size_t d = p.shardAxis + 1; d < p.shape.size(); ++d)
    inner *= p.shape[d];
  const int64_t fullAxis = p.shape[p.shardAxis];
  const int64_t localAxis = fullAxis / tp;
  const int64_t innerIdx = local % inner, axisIdx = (local / inner) % localAxis,
                outer = local / (inner * localAxis);
  // Walk the groups: each contributes size/tp consecutive local entries.
  int64_t offset = 0, seen = 0, fullAxisIdx = 0;
  for (int64_t g : p.groups) {
    int64_t part = g / tp;
    if (axisIdx < seen + part) {
      fullAxisIdx = offset + rank * part + (axisIdx - seen);
      break;
    }
    seen += part;
    offset += g;
  }
  return (outer * fullAxis + fullAxisIdx) * inner + innerIdx;
}

float initialValue(const std::string &name, int layer, int64_t index, uint64_t seed) {
  if (endsWith(name, ".bias"))
    return 0.f;
  if (name.find("norm") != std::string::npos || name.find(".ln") != std::string::npos)
    return 1.f;
  uint64_t key = splitmix64(seed ^ fnv1a(name) ^ splitmix64(uint64_t(layer) + 1)) ^ uint64_t(index);
  uint64_t a = splitmix64(key), b = splitmix64(key ^ 0x5bd1e995ull);
  double u1 = (double(a >> 11) + 0.5) / 9007199254740992.0,
         u2 = double(b >> 11) / 9007199254740992.0;
  return float(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

int runTrainer(const TrainerSpec &spec, int argc, char **argv) {
  MpiRuntime mpi(argc, argv);
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  const int dp = spec.dp, tpSize = spec.tp;
  if (world->size() != dp * tpSize)
    abortJob("the plan has " + std::to_string(dp) + " data-parallel x " + std::to_string(tpSize) +
             " tensor-parallel rank" + (dp * tpSize == 1 ? "" : "s") + ", the job has " +
             std::to_string(world->size()) + " (run it with mpirun -np " +
             std::to_string(dp * tpSize) + ")");
  // tp ranks are consecutive: world rank = dpRank * tp + tpRank.
  const int worldRank = world->rank(), rank = worldRank / tpSize, tpRank = worldRank % tpSize;
  std::unique_ptr<Communicator> tpComm = world->split(rank, tpRank),
                                dpComm = world->split(tpRank, rank);
  TpContext tpContext(tpSize > 1 ? tpComm.get() : nullptr);
  Options o = parse(argc, argv);
  if (o.resume && o.ckptDir.empty())
    usage("--resume needs --ckpt-dir");
  if (!o.ckptDir.empty() && worldRank == 0 && !o.resume) {
    std::error_code ec;
    std::filesystem::create_directories(o.ckptDir, ec);
    if (ec)
      abortJob("cannot create the checkpoint folder " + o.ckptDir + ": " + ec.message());
  }
  const float lr = o.lr > 0 ? o.lr : spec.lr;
  // Data: every rank opens the token file and reads its own rows.
  std::optional<TokenFile> tokenFile;
  std::optional<BatchSampler> sampler;
  if (!o.data.empty()) {
    std::string error;
    tokenFile = TokenFile::open(o.data, error);
    if (!tokenFile)
      abortJob(error);
    if (auto bad = tokenFile->checkVocabulary(uint32_t(spec.vocab)))
      abortJob(*bad);
    sampler =
        BatchSampler::create(*tokenFile, {dp, spec.microBatch, spec.gradAccum, spec.seqLen}, error);
    if (!sampler)
      abortJob(error);
  }
  std::vector<uint32_t> rowsIn(size_t(spec.microBatch) * spec.seqLen), rowsOut(rowsIn.size());
  Frame global(spec.buffers, false);
  std::vector<Frame> layers(spec.layers, Frame(spec.buffers, true));
  auto storage = [&](int buffer, int layer) -> std::vector<float> & {
    return spec.buffers[buffer].layer ? layers[layer].vec(buffer) : global.vec(buffer);
  };
  // Parameters, their fp32 master copies, Adam moments and gradient sums.
  // With ZeRO-1 each dp rank keeps the optimizer state of one slice of
  // every tensor (chunk elements, the last slice padded with zeros).
  const bool zero1 = spec.zeroOptimizer && dp > 1;
  // With ZeRO-2 the gradient sums are split too: every micro-batch's
  // gradients are reduce-scattered into this rank's slice at once.
  const bool zero2 = zero1 && spec.zeroGrads;
  struct State {
    std::vector<float> master, m, v, grad;
    size_t chunk = 0; ///< ZeRO-1: elements of this rank's slice
  };
  std::vector<std::vector<State>> state(spec.params.size());
  for (size_t p = 0; p < spec.params.size(); ++p) {
    const ParamSpec &ps = spec.params[p];
    int copies = spec.buffers[ps.buffer].layer ? spec.layers : 1;
    for (int l = 0; l < copies; ++l) {
      std::vector<float> &w = storage(ps.buffer, l);
      for (size_t i = 0; i < w.size(); ++i)
        w[i] = initialValue(ps.name, l, fullIndexOf(ps, tpRank, tpSize, int64_t(i)), o.seed);
      if (zero1) {
        size_t chunk = (w.size() + dp - 1) / dp;
        std::vector<float> master(chunk, 0.f);
        for (size_t i = 0; i < chunk && rank * chunk + i < w.size(); ++i)
          master[i] = w[rank * chunk + i];
        state[p].push_back({master, std::vector<float>(chunk), std::vector<float>(chunk),
                            std::vector<float>(w.size()), chunk});
      } else {
        state[p].push_back({w, std::vector<float>(w.size()), std::vector<float>(w.size()),
                            std::vector<float>(w.size()), 0});
      }
    }
  }
  const int64_t tokensPerMicroBatch = int64_t(spec.microBatch) * spec.seqLen;
  if (worldRank == 0)
    std::printf("mistrt: training %s (%s) for %d steps on %d rank%s: %d micro-batches of %d x %d "
                "tokens per rank, lr %g\n",
                spec.model.c_str(), spec.plan.c_str(), o.steps, dp * tpSize,
                dp * tpSize == 1 ? "" : "s", spec.gradAccum, spec.microBatch, spec.seqLen, lr);
  // Checkpoints: full tensors named after the parameters (a layer's as
  // layers.<l>.<name>), the fp32 master copy and Adam moments beside them.
  auto tensorName = [&](size_t p, size_t l) {
    const std::string name = spec.params[p].name;
    if (!spec.buffers[spec.params[p].buffer].layer)
      return name;
    const std::string rest = name.rfind("layer.", 0) == 0 ? name.substr(6) : name;
    return "layers." + std::to_string(l) + "." + rest;
  };
  // A tensor of this tp rank's shape as the full tensor (gathered over tp).
  auto gathered = [&](size_t p, const std::vector<float> &local) {
    const ParamSpec &ps = spec.params[p];
    if (ps.shardAxis < 0 || tpSize == 1)
      return local;
    std::vector<float> all(local.size() * tpSize), full(all.size());
    tpComm->allGather(local.data(), all.data(), local.size());
    for (int r = 0; r < tpSize; ++r)
      for (size_t i = 0; i < local.size(); ++i)
        full[size_t(fullIndexOf(ps, r, tpSize, int64_t(i)))] = all[size_t(r) * local.size() + i];
    return full;
  };
  // This tp rank's whole tensor from the dp ranks' ZeRO-1 slices.
  auto unsplit = [&](const std::vector<float> &slice, size_t n) {
    if (!zero1)
      return slice;
    std::vector<float> all(slice.size() * dp);
    dpComm->allGather(slice.data(), all.data(), slice.size());
    all.resize(n);
    return all;
  };
  auto save = [&](int step) {
    // Every tp rank takes part in the gathers; the first rank writes.
    std::vector<TensorData> tensors;
    for (size_t p = 0; p < spec.params.size(); ++p)
      for (size_t l = 0; l < state[p].size(); ++l) {
        std::vector<int64_t> shape = spec.params[p].shape;
        const std::string name = tensorName(p, l);
        tensors.push_back(TensorData::fromFloats(
            name, shape, gathered(p, storage(spec.params[p].buffer, int(l)))));
        const size_t n = storage(spec.params[p].buffer, int(l)).size();
        tensors.push_back(TensorData::fromFloats(name + ".master", shape,
                                                 gathered(p, unsplit(state[p][l].master, n))));
        tensors.push_back(TensorData::fromFloats(name + ".adam_m", shape,
                                                 gathered(p, unsplit(state[p][l].m, n))));
        tensors.push_back(TensorData::fromFloats(name + ".adam_v", shape,
                                                 gathered(p, unsplit(state[p][l].v, n))));
      }
    if (worldRank != 0)
      return;
    std::map<std::string, std::string> meta{{"format", "mistrt-checkpoint-1"},
                                            {"model", spec.model},
                                            {"step", std::to_string(step)},
                                            {"seed", std::to_string(o.seed)}};
    const std::string path = o.ckptDir + "/latest.safetensors";
    if (auto error = writeSafetensors(path, tensors, meta))
      abortJob("cannot write the checkpoint: " + *error);
    std::printf("checkpoint of step %d written to %s\n", step, path.c_str());
  };
  int firstStep = 1;
  if (o.resume) {
    const std::string path = o.ckptDir + "/latest.safetensors";
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
    if (meta("format") != "mistrt-checkpoint-1" || meta("model") != spec.model)
      abortJob(path + ": a checkpoint of '" + meta("model") + "', not of '" + spec.model + "'");
    firstStep = std::atoi(meta("step").c_str()) + 1;
    for (size_t p = 0; p < spec.params.size(); ++p)
      for (size_t l = 0; l < state[p].size(); ++l) {
        const std::string name = tensorName(p, l);
        const size_t n = storage(spec.params[p].buffer, int(l)).size();
        auto load = [&](const std::string &tensor, std::vector<float> &into, bool optimizerState) {
          const TensorData *t = ckpt->find(tensor);
          auto values = t ? t->floats() : std::nullopt;
          const size_t fullSize = n * (spec.params[p].shardAxis >= 0 ? tpSize : 1);
          if (!values || values->size() != fullSize)
            abortJob(path + ": tensor '" + tensor +
                     "' is missing or has another size than the model's");
          std::vector<float> local(n); // this tp rank's part of the full tensor
          for (size_t i = 0; i < n; ++i)
            local[i] = (*values)[size_t(fullIndexOf(spec.params[p], tpRank, tpSize, int64_t(i)))];
          if (!optimizerState || !zero1) {
            into = local;
            return;
          }
          size_t chunk = state[p][l].chunk; // and this dp rank's ZeRO-1 slice of that
          into.assign(chunk, 0.f);
          for (size_t i = 0; i < chunk && rank * chunk + i < n; ++i)
            into[i] = local[rank * chunk + i];
        };
        load(name, storage(spec.params[p].buffer, int(l)), false);
        load(name + ".master", state[p][l].master, true);
        load(name + ".adam_m", state[p][l].m, true);
        load(name + ".adam_v", state[p][l].v, true);
      }
    if (worldRank == 0)
      std::printf("resumed from %s at step %d\n", path.c_str(), firstStep);
  }
  // Activation checkpointing: a checkpointed layer's activations (all its
  // float buffers but the parameters, their gradients and its input) are
  // released after its forward and recomputed before its backward.
  std::vector<int> released;
  {
    std::vector<bool> keep(spec.buffers.size(), false);
    for (const ParamSpec &ps : spec.params) {
      keep[ps.buffer] = true;
      for (int g : ps.grads)
        keep[g] = true;
    }
    keep[spec.layerIn] = true;
    for (size_t i = 0; i < spec.buffers.size(); ++i)
      if (spec.buffers[i].layer && spec.buffers[i].kind == BufferKind::Float && !keep[i])
        released.push_back(int(i));
  }
  const int firstCheckpointed = spec.layers - spec.ckptLayers;
  std::vector<TraceEvent> trace;
  for (int step = firstStep; step <= o.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    trace.clear();
    // Runs one region function and, for --trace, records when.
    auto timed = [&](RegionFn fn, Frame &layer, const std::string &name) {
      auto t0 = std::chrono::steady_clock::now();
      fn(global, layer, tpContext);
      auto t1 = std::chrono::steady_clock::now();
      trace.push_back({name, std::chrono::duration<double>(t0 - start).count(),
                       std::chrono::duration<double>(t1 - t0).count()});
    };
    for (size_t p = 0; p < state.size(); ++p)
      for (size_t l = 0; l < state[p].size(); ++l)
        state[p][l].grad.assign(
            zero2 ? state[p][l].chunk : storage(spec.params[p].buffer, int(l)).size(), 0.f);
    double lossSum = 0;
    for (int mb = 0; mb < spec.gradAccum; ++mb) {
      if (sampler) {
        if (auto bad = sampler->fill(step - 1, mb, rank, rowsIn.data(), rowsOut.data()))
          abortJob(*bad);
        for (size_t i = 0; i < rowsIn.size(); ++i) {
          global.ids(spec.tokensBuffer)[i] = int32_t(rowsIn[i]);
          global.ids(spec.targetsBuffer)[i] = int32_t(rowsOut[i]);
        }
      } else {
        for (int b = 0; b < spec.microBatch; ++b) {
          // Sequence k of the step's global batch: micro-batch k / (dp b), rank (k mod dp b) / b.
          int64_t k = int64_t(step - 1) * spec.gradAccum * dp * spec.microBatch +
                      (int64_t(mb) * dp + rank) * spec.microBatch + b;
          syntheticSequence(k, spec.seqLen, spec.vocab,
                            global.ids(spec.tokensBuffer) + b * spec.seqLen,
                            global.ids(spec.targetsBuffer) + b * spec.seqLen);
        }
      }
      // Forward through pre, every layer and post.
      const std::string mbName = std::to_string(mb);
      timed(spec.preForward, layers[0], "pre F" + mbName);
      std::vector<float> x = global.vec(spec.preOut);
      for (int l = 0; l < spec.layers; ++l) {
        layers[l].vec(spec.layerIn) = x;
        timed(spec.layerForward, layers[l], "layer " + std::to_string(l) + " F" + mbName);
        x = layers[l].vec(spec.layerOut);
        if (l >= firstCheckpointed)
          for (int i : released)
            std::vector<float>().swap(layers[l].vec(i)); // free it: recomputed in the backward
      }
      global.vec(spec.postIn) = x;
      timed(spec.postForward, layers[0], "post F" + mbName);
      float loss = global.at(spec.lossBuffer)[0];
      if (!std::isfinite(loss))
        abortJob("non-finite loss at step " + std::to_string(step) + ", micro-batch " +
                 std::to_string(mb));
      lossSum += loss;
      // Backward; the op wrappers accumulate into parameter gradients, so
      // they start from zero for every micro-batch and are summed here.
      for (const ParamSpec &ps : spec.params)
        for (int g : ps.grads)
          for (int l = 0; l < (spec.buffers[g].layer ? spec.layers : 1); ++l)
            std::fill(storage(g, l).begin(), storage(g, l).end(), 0.f);
      global.vec(spec.postGradIn).assign(1, 1.f);
      timed(spec.postBackward, layers[0], "post B" + mbName);
      std::vector<float> dx = global.vec(spec.postGradOut);
      for (int l = spec.layers - 1; l >= 0; --l) {
        if (l >= firstCheckpointed) {
          for (int i : released)
            layers[l].vec(i).assign(size_t(std::max<int64_t>(spec.buffers[i].elements, 1)), 0.f);
          timed(spec.layerForward, layers[l], "layer " + std::to_string(l) + " R" + mbName);
        }
        layers[l].vec(spec.layerGradIn) = dx;
        timed(spec.layerBackward, layers[l], "layer " + std::to_string(l) + " B" + mbName);
        dx = layers[l].vec(spec.layerGradOut);
      }
      global.vec(spec.preGradIn) = dx;
      timed(spec.preBackward, layers[0], "pre B" + mbName);
      for (size_t p = 0; p < spec.params.size(); ++p)
        for (size_t l = 0; l < state[p].size(); ++l) {
          State &st = state[p][l];
          if (zero2) { // this micro-batch's gradients, summed over dp into the slice
            std::vector<float> padded(st.chunk * dp, 0.f), slice(st.chunk);
            for (int g : spec.params[p].grads) {
              const std::vector<float> &src = storage(g, static_cast<int>(l));
              for (size_t i = 0; i < src.size(); ++i)
                padded[i] += src[i];
            }
            dpComm->reduceScatterSum(padded.data(), slice.data(), st.chunk);
            for (size_t i = 0; i < st.chunk; ++i)
              st.grad[i] += slice[i];
            continue;
          }
          for (int g : spec.params[p].grads) {
            const std::vector<float> &src = storage(g, static_cast<int>(l));
            for (size_t i = 0; i < st.grad.size(); ++i)
              st.grad[i] += src[i];
          }
        }
    }
    // Sum over the data-parallel replicas; every rank then holds the same
    // gradients and takes the same step.
    if (dp > 1) {
      for (auto &copies : state)
        for (State &s : copies) {
          if (zero2)
            continue;  // already summed into the slices, micro-batch by micro-batch
          if (zero1) { // each rank keeps the sum of its slice only
            std::vector<float> padded(s.chunk * dp, 0.f), slice(s.chunk);
            std::copy(s.grad.begin(), s.grad.end(), padded.begin());
            dpComm->reduceScatterSum(padded.data(), slice.data(), s.chunk);
            s.grad.swap(slice);
          } else {
            dpComm->allReduceSum(s.grad.data(), s.grad.size());
          }
        }
      lossSum = dpComm->allReduceSumDouble(lossSum);
    }
    // The mean over micro-batches and replicas, clipped by the global norm:
    // shards are summed over tp, replicated tensors counted once.
    double norm2 = 0, shardedNorm2 = 0;
    for (size_t p = 0; p < state.size(); ++p)
      for (State &s : state[p]) {
        double sq = 0;
        for (float g : s.grad)
          sq += double(g) * g;
        (spec.params[p].shardAxis >= 0 && tpSize > 1 ? shardedNorm2 : norm2) += sq;
      }
    if (zero1) { // the slices of the dp ranks make up the tensors
      norm2 = dpComm->allReduceSumDouble(norm2);
      shardedNorm2 = dpComm->allReduceSumDouble(shardedNorm2);
    }
    norm2 += tpSize > 1 ? tpComm->allReduceSumDouble(shardedNorm2) : shardedNorm2;
    double norm = std::sqrt(norm2) / (spec.gradAccum * dp);
    if (!std::isfinite(norm))
      abortJob("non-finite gradient norm at step " + std::to_string(step));
    float scale = float(1.0 / (spec.gradAccum * dp)) *
                  (norm > spec.gradClip ? float(spec.gradClip / norm) : 1.f);
    float stepLr = lr;
    if (spec.warmupSteps > 0 && step <= spec.warmupSteps)
      stepLr = lr * float(step) / float(spec.warmupSteps);
    else if (o.steps > spec.warmupSteps) // cosine to 10% over the run
      stepLr = lr * float(0.1 + 0.45 * (1 + std::cos(3.141592653589793 * (step - spec.warmupSteps) /
                                                     std::max(1, o.steps - spec.warmupSteps))));
    for (size_t p = 0; p < spec.params.size(); ++p)
      for (size_t l = 0; l < state[p].size(); ++l) {
        State &s = state[p][l];
        std::vector<float> &w = storage(spec.params[p].buffer, static_cast<int>(l));
        if (zero1) { // step this rank's slice, then gather the updated weights
          std::vector<float> slice(s.chunk), all(s.chunk * dp);
          mist::kernels::adamWRef({s.master.data(), s.m.data(), s.v.data(), slice.data(),
                                   s.grad.data(), int64_t(s.chunk), stepLr, spec.beta1, spec.beta2,
                                   spec.eps, spec.weightDecay, scale, step});
          dpComm->allGather(slice.data(), all.data(), s.chunk);
          std::copy(all.begin(), all.begin() + w.size(), w.begin());
          continue;
        }
        mist::kernels::adamWRef({s.master.data(), s.m.data(), s.v.data(), w.data(), s.grad.data(),
                                 int64_t(w.size()), stepLr, spec.beta1, spec.beta2, spec.eps,
                                 spec.weightDecay, scale, step});
      }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (worldRank == 0 && (step % o.logEvery == 0 || step == o.steps || step == firstStep)) {
      // Model FLOP/s per rank (the report's definition: no recompute) and
      // this process's peak resident memory.
      const double samples = double(spec.microBatch) * spec.gradAccum * dp;
      struct rusage usage {};
      getrusage(RUSAGE_SELF, &usage);
      std::printf("step %4d  loss %.6f  grad norm %.4f  lr %.3g  %.0f tokens/s  %.2f GFLOP/s/rank  "
                  "%.0f MiB\n",
                  step, lossSum / (spec.gradAccum * dp), norm, stepLr,
                  double(tokensPerMicroBatch) * spec.gradAccum * dp / std::max(seconds, 1e-9),
                  spec.modelFlopsPerSample * samples / (dp * tpSize) / std::max(seconds, 1e-9) /
                      1e9,
                  double(usage.ru_maxrss) / 1024);
    }
    std::fflush(stdout);
    if (!o.ckptDir.empty() && ((o.ckptEvery > 0 && step % o.ckptEvery == 0) || step == o.steps))
      save(step);
    if (o.stopAfter > 0 && step == o.stopAfter) {
      if (worldRank == 0)
        std::printf("stopping after step %d (--stop-after)\n", step);
      return 0;
    }
  }
  if (!o.trace.empty() && worldRank == 0) { // rank 0's view: every replica runs the same steps
    if (!writeTrace(o.trace, spec.model, trace))
      abortJob("cannot write the trace to " + o.trace);
    std::printf("measured timeline of the last step written to %s\n", o.trace.c_str());
  }
  return 0;
}

} // namespace mist::rt
