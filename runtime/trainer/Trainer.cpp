//===- Trainer.cpp - The training loop an emitted train.cu runs -----------===//
/// \file
/// runTrainer places this rank (runtime/comm/RankLayout: stages on
/// consecutive world ranks, tp innermost), builds its stage's frames,
/// parameter store, activation stash and runner, and then, step by step:
/// runs the stage's 1F1B table, reduces the gradients, clips them by the
/// global norm (one all-reduce over the world), applies AdamW with warmup
/// and cosine decay, logs, and writes checkpoints.
//===----------------------------------------------------------------------===//
#include "runtime/trainer/Trainer.h"

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/device/Device.h"
#include "runtime/device/DeviceCommunicator.h"
#include "runtime/ops/Ops.h"
#include "runtime/trainer/CheckpointFolder.h"
#include "runtime/trainer/CheckpointLock.h"
#include "runtime/trainer/Checkpointing.h"
#include "runtime/trainer/MetricsLog.h"
#include "runtime/trainer/Options.h"
#include "runtime/trainer/SbatchScript.h"
#include "runtime/trainer/StageRunner.h"
#include "runtime/trainer/StopSignals.h"
#include "schedule/Schedule.h"
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

namespace mist::rt {

namespace {

/// Places this rank on the plan's stages (stages on consecutive ranks, tp
/// innermost); a job with the wrong number of ranks ends, naming the plan's.
RankLayout placeRank(const TrainerSpec &spec, const Communicator &world) {
  std::vector<StageShape> shapes;
  std::string stagesText;
  int ranks = 0;
  for (const StageSpec &s : spec.stages) {
    shapes.push_back({s.dp * s.tp, s.dp, s.tp});
    stagesText += (stagesText.empty() ? "" : ", ") + std::string("stage ") +
                  std::to_string(shapes.size() - 1) + ": dp " + std::to_string(s.dp) + " x tp " +
                  std::to_string(s.tp);
    ranks += s.dp * s.tp;
  }
  if (world.size() != ranks) {
    const Launcher launcher = detectLauncher();
    abortJob(
        "the plan needs " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + " (" +
        stagesText + "), the job has " + std::to_string(world.size()) + " (" +
        (launcher.kind == LauncherKind::Unknown ? "" : "started by " + launcher.name() + "; ") +
        launcher.launchCommand(ranks) + ")");
  }
  std::string error;
  auto layout = RankLayout::build(shapes, world.size(), world.rank(), error);
  if (!layout)
    abortJob("cannot place the plan's stages on the job's ranks: " + error);
  return std::move(*layout);
}

/// Compares the hosts the ranks run on with the plan's meshes
/// (runtime/comm/Placement.h): warnings are printed by rank 0, a refusal
/// ends the job unless --any-placement.
void checkHosts(const TrainerSpec &spec, const RankLayout &layout,
                const std::vector<std::string> &hostOfRank, bool anyPlacement,
                Communicator &world) {
  std::vector<StageMesh> meshes;
  for (const StageSpec &s : spec.stages)
    meshes.push_back(s.mesh);
  const Launcher launcher = detectLauncher();
  const auto findings = checkPlacement(layout, meshes, spec.cluster, hostOfRank, launcher);
  const bool root = layout.myWorldRank == 0;
  if (root && hostOfRank.size() > 1 && hostOfRank.front() != hostOfRank.back())
    std::printf("mistrt: ranks on hosts %s\n", describeHosts(hostOfRank).c_str());
  // On GPUs, ranks sharing a GPU would run out of its memory or crawl.
  const bool onGpus = std::string(device::backendName()) == "cuda";
  for (const PlacementFinding &f : findings) {
    if ((f.refuses || (f.sharesGpus && onGpus)) && !anyPlacement)
      abortJobTogether(world, "placement: " + f.text + " (--any-placement runs it anyway)");
    if (root)
      std::fprintf(stderr, "mistrt: warning: placement: %s\n", f.text.c_str());
  }
  std::fflush(stderr);
}

/// The peak the log's MFU divides by: the plan's device's, and only when
/// the job runs on that device. CPU ranks and other GPUs get no MFU rather
/// than a figure against another machine's peak.
double utilizationPeakTflops(const TrainerSpec &spec, const std::string &runningOn) {
  return runningOn == spec.device ? spec.devicePeakTflops : 0;
}

/// Says once what the MFU figure means, or why there is none.
void describeUtilization(const TrainerSpec &spec, const std::string &runningOn) {
  if (utilizationPeakTflops(spec, runningOn) > 0)
    std::printf("mistrt: MFU is model FLOP/s per rank over the %g TFLOP/s peak of the %s\n",
                spec.devicePeakTflops, spec.device.c_str());
  else if (spec.devicePeakTflops > 0)
    std::printf("mistrt: no MFU: the plan's peak (%g TFLOP/s) is the %s's, and this job runs on "
                "%s\n",
                spec.devicePeakTflops, spec.device.c_str(),
                runningOn == "CPU" ? "CPU ranks" : runningOn.c_str());
}

/// One step's log line: loss, gradient norm, learning rate, throughput, the
/// model FLOP/s per rank (the report's definition: no recompute), the peak
/// of the device memory the runtime allocated, and what was offloaded.
/// A step's figures: the loss and norm, its throughput (model FLOP/s per
/// rank, and MFU where the job runs on the planned device, peakTflops > 0)
/// and memory.
StepRecord stepRecord(const TrainerSpec &spec, double peakTflops, int step, double loss,
                      double norm, float stepLr, int64_t samplesPerStep, int ranks, double seconds,
                      const OffloadEngine &offload) {
  StepRecord r;
  r.step = step;
  r.loss = loss;
  r.gradNorm = norm;
  r.lr = stepLr;
  r.seconds = seconds;
  const double flopsPerRank =
      spec.modelFlopsPerSample * double(samplesPerStep) / ranks / std::max(seconds, 1e-9);
  r.tokensPerSecond = double(samplesPerStep) * spec.seqLen / std::max(seconds, 1e-9);
  r.tflopsPerRank = flopsPerRank / 1e12;
  if (peakTflops > 0)
    r.mfu = flopsPerRank / (peakTflops * 1e12);
  r.peakMiB = double(device::peakBytes()) / (1 << 20);
  r.offloadedMiB = double(offload.peakHostBytes()) / (1 << 20);
  r.predictedSeconds = spec.predictedStepSeconds;
  return r;
}

void printStep(const StepRecord &r) {
  std::printf("step %4d  loss %.6f  grad norm %.4f  lr %.3g  %.0f tokens/s  %.4g TFLOP/s/rank  "
              "%.2f MiB peak",
              r.step, r.loss, r.gradNorm, r.lr, r.tokensPerSecond, r.tflopsPerRank, r.peakMiB);
  if (r.mfu >= 0)
    std::printf("  MFU %.2g%%", 100 * r.mfu);
  if (r.offloadedMiB > 0)
    std::printf("  offloaded %.2f MiB", r.offloadedMiB);
  std::printf("\n");
}

/// The step lines show rank 0's peak; a pipeline's other stages hold other
/// layers and pre or post, so each stage's peak (the most any of its ranks
/// allocated) is reported for comparison with the plan's prediction.
void reportStagePeaks(const RankLayout &layout, Communicator &world) {
  std::string peaks;
  for (size_t s = 0; s < layout.stages.size(); ++s) {
    const double mine = int(s) == layout.stage ? double(device::peakBytes()) : 0.0;
    char text[64];
    std::snprintf(text, sizeof text, "%sstage %zu %.2f MiB", s ? ", " : "", s,
                  world.allReduceMax(mine) / (1 << 20));
    peaks += text;
  }
  if (layout.myWorldRank == 0)
    std::printf("mistrt: peak device memory by stage (its largest rank): %s\n", peaks.c_str());
  // Not in the peaks above, nor in the plan's prediction: the fp32 copies of
  // bf16 operands that the fp32 kernels read (runtime/ops/Fp32Staging.h).
  const double staging = world.allReduceMax(double(device::stagingPeakBytes()));
  if (layout.myWorldRank == 0 && staging > 0)
    std::printf("mistrt: besides, fp32 staging of bf16 operands for the fp32 kernels: at most "
                "%.2f MiB at once on a rank (transient, per op)\n",
                staging / (1 << 20));
  // The peaks above are the runtime's own allocations, which the plan
  // predicts; the device's own count also holds what the libraries keep.
  const double reported = world.allReduceMax(double(device::deviceReportedBytesInUse()));
  if (layout.myWorldRank == 0 && reported > 0)
    std::printf("mistrt: the device reports %.2f MiB in use now (the most on a rank): the "
                "allocations above and the CUDA context, cuBLASLt's and cuDNN's workspaces and "
                "free cached blocks\n",
                reported / (1 << 20));
}

/// A run's training data: a token file (--data) or Megatron-LM datasets
/// (--data-path), and the sampler over them. The sampler points into the
/// others, so this stays where the caller made it.
struct TrainingData {
  std::optional<TokenFile> tokenFile;
  std::optional<MegatronData> megatron;
  std::optional<BatchSampler> sampler;
  /// What the data hold (a token file's count and hash, the Megatron-LM
  /// indexes' hashes and order), for the checkpoints' run record.
  std::string contents;
};

/// Opens the data of a run with --data or --data-path: every rank of the
/// first and last stages reads its own rows; the others read none.
void openTrainingData(const TrainerSpec &spec, const Options &o, const RankLayout &layout,
                      TrainingData &data) {
  if ((o.data.empty() && o.dataPath.empty()) || !(layout.isFirstStage() || layout.isLastStage()))
    return;
  std::string error;
  const BatchShape shape{spec.stages[0].dp, spec.stages[0].microBatch, spec.gradAccum, spec.seqLen};
  if (!o.dataPath.empty()) {
    MegatronDataRequest r;
    r.dataPath = o.dataPath;
    r.split = o.split;
    r.samples = int64_t(o.steps) * shape.globalBatch();
    r.seqLen = spec.seqLen;
    r.seed = uint32_t(o.seed);
    r.vocabulary = uint64_t(spec.vocab);
    data.megatron = MegatronData::open(r, error);
    if (!data.megatron)
      abortJob(error);
    data.contents = data.megatron->fingerprint();
    data.sampler = BatchSampler::create(*data.megatron, shape, o.steps, error);
    if (!data.sampler)
      abortJob(error);
    return;
  }
  data.tokenFile = TokenFile::open(o.data, error);
  if (!data.tokenFile)
    abortJob(error);
  if (data.tokenFile->vocabulary() > spec.vocab)
    abortJob(o.data + " was tokenized for a vocabulary of " +
             std::to_string(data.tokenFile->vocabulary()) + " tokens (its header says so); " +
             spec.model + "'s vocabulary is " + std::to_string(spec.vocab) +
             ": tokenize it for this model, or train a model with that vocabulary");
  uint64_t hash = 0;
  if (auto bad = data.tokenFile->checkVocabulary(uint32_t(spec.vocab), &hash))
    abortJob(*bad);
  char text[64];
  std::snprintf(text, sizeof text, "%lld tokens, FNV-1a %016llx", (long long)data.tokenFile->size(),
                (unsigned long long)hash);
  data.contents = text;
  data.sampler = BatchSampler::create(*data.tokenFile, shape, error);
  if (!data.sampler)
    abortJob(error);
  if (o.shuffle)
    data.sampler->shuffle(o.seed);
}

/// The groups that sum a tied weight's gradients over the first and last
/// stages; null on ranks outside them.
struct TiedGroups {
  std::unique_ptr<Communicator> whole;  ///< the first and last stages' ranks
  std::unique_ptr<Communicator> shards; ///< of those, the ranks of one tp rank
};

TiedGroups makeTiedGroups(Communicator &deviceWorld, const RankLayout &layout, int stages) {
  TiedGroups tied;
  const bool holdsTied = stages > 1 && (layout.isFirstStage() || layout.isLastStage());
  tied.whole = deviceWorld.split(holdsTied ? 0 : -1, layout.myWorldRank);
  // When both end stages split their weights over the same tp, tp rank r
  // holds the same part of a tied weight on both: the ranks of one tp rank
  // sum that part's gradients where they are, without the full tensor.
  const bool tiedShardsAlign = holdsTied && layout.stages.front().tp == layout.stages.back().tp;
  tied.shards = deviceWorld.split(tiedShardsAlign ? layout.tpRank : -1, layout.myWorldRank);
  return tied;
}

/// One line per stage: where it runs and what its memory holds per rank.
void printStageMemory(const RankLayout &layout, const StageSpec &stage, const StageMemory &memory,
                      const ActivationStash &stash) {
  if (layout.dpRank != 0 || layout.tpRank != 0)
    return;
  std::printf("mistrt: stage %d (%s) on ranks %d-%d, per rank: parameters and "
              "gradient buffers %.2f MiB, saved activations of %d micro-batch%s in flight "
              "%.2f MiB, scratch %.2f MiB\n",
              layout.stage, stage.layerRanges().c_str(), layout.stageStart,
              layout.stageStart + stage.dp * stage.tp - 1,
              double(memory.parameterBytes()) / (1 << 20), stash.slots(),
              stash.slots() == 1 ? "" : "es", double(stash.reservedBytes()) / (1 << 20),
              double(memory.scratchBytes()) / (1 << 20));
  std::fflush(stdout);
}

/// What a checkpoint records of the run besides its schedule: the plan it
/// ran, and where its data stood after `step` (the file, what it holds
/// (`dataTokens`: its token count and their hash, empty for synthetic
/// data), its order, the next sequence a resumed run reads).
std::map<std::string, std::string> runRecord(const TrainerSpec &spec, const Options &o, int step,
                                             int64_t samplesPerStep,
                                             const std::string &dataTokens) {
  const bool synthetic = o.data.empty() && o.dataPath.empty();
  const std::string order = !o.dataPath.empty()
                                ? "Megatron-LM's order, seed " + std::to_string(o.seed)
                            : o.shuffle ? "shuffled, seed " + std::to_string(o.seed)
                                        : "file order";
  return {{"plan", spec.plan},
          {"data", synthetic            ? "synthetic"
                   : o.dataPath.empty() ? o.data
                                        : "--data-path " + o.dataPath + " --split " + o.split},
          {"data_tokens", synthetic ? "synthetic" : dataTokens},
          {"data_order", order},
          {"next_sequence", std::to_string(int64_t(step) * samplesPerStep)}};
}

/// A resumed run that reads other data, or in another order, than the run
/// it continues trains on other batches than that run would have: say so.
/// The data are compared by what the files hold (their token count and
/// hash), so a copy under another path is the same data and another file
/// under the same path is not; a checkpoint from before that record is
/// compared by path.
void compareData(const OpenedCheckpoint &ckpt, const TrainerSpec &spec, const Options &o,
                 const std::string &dataTokens) {
  const auto &meta = ckpt.file->metadata;
  auto data = meta.find("data"), order = meta.find("data_order"), tokens = meta.find("data_tokens");
  if (data == meta.end() || order == meta.end()) // written before the record
    return;
  const auto now = runRecord(spec, o, 0, 0, dataTokens);
  const bool sameData = tokens != meta.end() ? tokens->second == now.at("data_tokens")
                                             : data->second == now.at("data");
  // "synthetic data", or "PATH (N tokens, FNV-1a H; file order)".
  auto describe = [](const std::string &path, const std::string &contents,
                     const std::string &order) {
    return path == "synthetic" ? std::string("synthetic data")
                               : path + " (" + contents + "; " + order + ")";
  };
  if (!sameData || order->second != now.at("data_order"))
    std::fprintf(
        stderr,
        "mistrt: warning: the checkpoint's run read %s, this run reads %s: from step %d on it "
        "trains on other batches than that run would have\n",
        describe(data->second, tokens != meta.end() ? tokens->second : "contents not recorded",
                 order->second)
            .c_str(),
        describe(now.at("data"), now.at("data_tokens"), now.at("data_order")).c_str(),
        ckpt.step + 1);
}

/// This run's learning-rate schedule: the model's, with the command line's
/// overrides. A floor above the peak ends the job here.
LrSchedule runSchedule(const TrainerSpec &spec, const Options &o, float lr) {
  LrSchedule s{lr,
               o.warmupSteps >= 0 ? o.warmupSteps : spec.warmupSteps,
               o.steps,
               o.lrDecay.value_or(spec.lrDecay),
               o.minLr > -2 ? o.minLr : spec.minLr,
               o.decayFraction > 0 ? o.decayFraction : spec.decayFraction};
  if (s.minLr > s.lr)
    usage("the learning rate's floor (min_lr " + std::to_string(s.minLr) +
          ") is above its peak (lr " + std::to_string(s.lr) + ")");
  // As the .mist refuses decay_fraction without lr_decay = wsd.
  if (o.decayFraction > 0 && s.decay != LrDecay::Wsd)
    usage("--decay-fraction is the decaying part of a wsd schedule; this run's decay is " +
          std::string(nameOf(s.decay)) + " (add --lr-decay wsd)");
  return s;
}

/// --resume: loads the checkpoint every rank agreed on into `store` and
/// returns the first step to train. The run goes on with the checkpoint's
/// learning-rate schedule, not one sized to this run's --steps, unless
/// --reschedule says otherwise: both are logged.
int resumeFromCheckpoint(OpenedCheckpoint state, const TrainerSpec &spec, const StageSpec &stage,
                         ParameterStore &store, int worldRank, const Options &o,
                         const std::string &dataTokens, LrSchedule &schedule) {
  loadCheckpoint(state, stage, store);
  if (worldRank == 0)
    compareData(state, spec, o, dataTokens);
  state.file.reset(); // the tensors are in the store now
  const int firstStep = state.step + 1;
  const LrSchedule asked = schedule;
  if (state.schedule && !o.reschedule)
    schedule = *state.schedule;
  if (worldRank != 0)
    return firstStep;
  std::printf("resumed from %s at step %d\n", state.source.c_str(), firstStep);
  if (!state.schedule)
    std::printf("mistrt: the checkpoint records no learning-rate schedule (written before the "
                "first step, or by an older trainer): this run's (%s) applies\n",
                asked.str().c_str());
  else if (!(*state.schedule == asked))
    std::printf(o.reschedule ? "mistrt: --reschedule: this run's schedule (%s) replaces the "
                               "checkpoint's (%s)\n"
                             : "mistrt: continuing the checkpoint's schedule (%2$s), not this "
                               "run's (%1$s); --reschedule uses this run's\n",
                asked.str().c_str(), state.schedule->str().c_str());
  if (firstStep > o.steps)
    std::fprintf(stderr,
                 "mistrt: warning: the checkpoint is at step %d and --steps is %d: no step "
                 "left to train (pass a larger --steps to go on)\n",
                 firstStep - 1, o.steps);
  return firstStep;
}

/// What a rank trains with, built once before the first step.
struct RankTraining {
  const TrainerSpec &spec;
  const StageSpec &stage;
  const RankLayout &layout;
  Communicator &world;
  ProcessGroups &groups;
  Streams &streams;
  ParameterStore &store;
  StageRunner &runner;
};

/// The figures of one step that its log line shows.
struct StepFigures {
  double loss, norm;
  double seconds; ///< until the device finished the step
};

/// One step: the stage's 1F1B table, the gradient reduction, the global
/// loss and gradient norm, and AdamW with the gradients clipped by that
/// norm; returns when the device has finished it.
StepFigures trainStep(const RankTraining &t, int step, float stepLr) {
  const TrainerSpec &spec = t.spec;
  auto start = std::chrono::steady_clock::now();
  t.streams.beginStep();
  t.store.gradients.beginStep();
  t.stage.iteration(t.runner, step);
  t.streams.run(StreamKind::G2G, "wait for sends", [&t] { t.groups.pipeline().waitSends(); });
  t.runner.finishStep(step);
  t.store.gradients.reduceGradients();
  // The mean loss over the step's sequences, and the global gradient norm:
  // one sum over the world each, every value counted by one rank.
  const bool reportsLoss = t.layout.isLastStage() && t.layout.tpRank == 0;
  const double loss = t.world.allReduceSumDouble(reportsLoss ? t.runner.lossSum() : 0) /
                      (double(spec.gradAccum) * t.layout.stages.back().dp);
  // Every gradient comes from the last stage's losses: the mean over its
  // G x dp micro-batch losses, whatever this stage's dp.
  const double scaleBack = 1.0 / (double(spec.gradAccum) * t.layout.stages.back().dp);
  const double norm =
      std::sqrt(t.world.allReduceSumDouble(t.store.gradients.normSquaredShare())) * scaleBack;
  if (!std::isfinite(norm))
    abortJob("non-finite gradient norm at step " + std::to_string(step));
  const float scale = float(scaleBack) * (norm > spec.gradClip ? float(spec.gradClip / norm) : 1.f);
  // The update runs in the next step's first forward, region by region, as
  // the stage schedule places it (or before a checkpoint: runPendingUpdate).
  t.store.optimizer.deferStep(
      {stepLr, spec.beta1, spec.beta2, spec.eps, spec.weightDecay, scale, step});
  t.streams.synchronize(); // the step's time is the device's
  return {loss, norm,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

/// The last step's optimizer update, where no next forward has run it yet:
/// before a checkpoint is written, and after the last step.
void runPendingUpdate(const RankTraining &t) {
  if (!t.store.optimizer.hasPendingStep())
    return;
  t.runner.finishPendingUpdate();
  if (t.store.optimizer.hasPendingStep()) // a tensor no group holds
    t.store.optimizer.finishDeferred();
  t.streams.synchronize();
}

/// --trace: the stage leaders' timelines of the last step, in one file.
void writeTraceIfAsked(const Options &o, const TrainerSpec &spec, const RankLayout &layout,
                       Communicator &world, const Streams &streams) {
  if (o.trace.empty())
    return;
  std::vector<int> leaders;
  for (int s = 0; s < int(spec.stages.size()); ++s)
    leaders.push_back(layout.worldRank(s, 0, 0));
  if (!gatherAndWriteTrace(world, leaders, streams.events(), spec.model, o.trace))
    abortJob("cannot write the trace to " + o.trace);
  if (layout.myWorldRank == 0)
    std::printf("measured timeline of the last step written to %s\n", o.trace.c_str());
}

/// The canonical initial values, drawn on the host's cores shared among its
/// ranks (a GPU draws them itself), and said when it is long (billions of
/// weights): nothing else shows before the first step. A resumed run loads
/// every tensor from its checkpoint (loadCheckpoint refuses one that lacks
/// any): nothing to draw.
void drawInitialValues(ParameterStore &store, const Options &o,
                       const std::vector<std::string> &hostOfRank, int worldRank, bool resumed) {
  const int ranksOnHost =
      int(std::count(hostOfRank.begin(), hostOfRank.end(), hostOfRank[size_t(worldRank)]));
  const int threads = initialValueThreads(ranksOnHost);
  const auto start = std::chrono::steady_clock::now();
  store.values.initialize(o.seed, threads, /*draw=*/!resumed);
  device::synchronizeStream(device::currentStream()); // a GPU draws them asynchronously
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (worldRank != 0 || seconds <= 2 || resumed)
    return;
  if (std::strcmp(device::backendName(), "cpu") == 0)
    std::printf("mistrt: initial values drawn in %.1f s on %d thread%s\n", seconds, threads,
                threads == 1 ? "" : "s");
  else
    std::printf("mistrt: initial values drawn in %.1f s on the device\n", seconds);
}

/// What rank 0 says before the first step: the model, plan and data, the
/// precision, the ops and what utilization is measured against.
void printRunHeader(const TrainerSpec &spec, const Options &o, const std::string &deviceName,
                    int ranks, float lr, int64_t samplesPerStep, const TrainingData &data) {
  std::printf("mistrt: training %s (%s) for %d steps on %d rank%s (%s): %d micro-batches of "
              "%lld sequences of %d tokens, lr %g\n",
              spec.model.c_str(), spec.plan.c_str(), o.steps, ranks, ranks == 1 ? "" : "s",
              deviceName.c_str(), spec.gradAccum, (long long)(samplesPerStep / spec.gradAccum),
              spec.seqLen, lr);
  if (data.megatron)
    std::printf("mistrt: data: %s\n", data.megatron->summary().c_str());
  if (const TokenFile *tokenFile = data.tokenFile ? &*data.tokenFile : nullptr)
    std::printf("mistrt: data %s (%s, %lld tokens), %s\n", o.data.c_str(),
                tokenFormatInfo(tokenFile->format()).name, (long long)tokenFile->size(),
                o.shuffle ? ("windows shuffled with seed " + std::to_string(o.seed)).c_str()
                          : "read in file order");
  std::printf("mistrt: precision: %s weights and activations, fp32 master weights and Adam "
              "moments, %s gradients\n",
              nameOf(spec.weightDtype), nameOf(spec.gradDtype));
  std::printf("mistrt: ops: %s\n", ops::describe().c_str());
  describeUtilization(spec, deviceName);
}

} // namespace

int runTrainer(const TrainerSpec &spec, int argc, char **argv) {
  const Options o = parseOptions(argc, argv);
  if (o.printSbatch) { // on a login node, before any launcher
    std::fputs(
        sbatchScript(spec, o, argc, argv, std::string(device::backendName()) == "cuda").c_str(),
        stdout);
    return 0;
  }
  MpiRuntime mpi(argc, argv);
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  if (o.overlap && std::string(device::backendName()) == "cpu" && !mpi.threadsConcurrent())
    abortJob("--overlap runs MPI calls from two threads at once, and this MPI library does not "
             "provide MPI_THREAD_MULTIPLE");
  ops::setThreadsPerRank(o.threads);
  const std::optional<RankLayout> layout = placeRank(spec, *world);
  const std::vector<std::string> hostOfRank = world->allGatherText(MpiCommunicator::hostName());
  checkHosts(spec, *layout, hostOfRank, o.anyPlacement, *world);
  const int ranks = world->size();
  // The device of this rank: ranks of one node share its GPUs in turn.
  const std::string deviceName = device::initialize(world->localRank());
  // The groups move device buffers: MPI on CPU ranks, NCCL on GPUs.
  std::unique_ptr<Communicator> deviceWorld = device::makeWorldCommunicator(*world);
  ProcessGroups groups(*deviceWorld, *layout);
  const int stages = int(spec.stages.size()), worldRank = layout->myWorldRank;
  const StageSpec &stage = spec.stages[size_t(layout->stage)];
  const TiedGroups tied = makeTiedGroups(*deviceWorld, *layout, stages);
  TpContext tpContext(stage.tp > 1 ? &groups.tp() : nullptr);
  // Every rank opens the checkpoint and the ranks compare what they found
  // before a tensor is used; a new run checks that all ranks see the folder.
  std::optional<OpenedCheckpoint> resumed, initial;
  if (o.resume)
    resumed = openCheckpointOnEveryRank(o.ckptDir, spec, stage, *world, hostOfRank);
  if (!o.initFrom.empty())
    initial = openCheckpointOnEveryRank(o.initFrom, spec, stage, *world, hostOfRank,
                                        /*weightsOnly=*/true);
  prepareCheckpointFolder(o.ckptDir, o.resume, checkpointBytes(spec), *world, hostOfRank);
  // One job at a time saves into a folder: rank 0 holds its lock.
  CheckpointLock folderLock;
  if (!o.ckptDir.empty() && world->rank() == 0)
    folderLock.acquire(o.ckptDir);
  world->barrier(); // no rank goes on while rank 0 may still refuse the folder
  const float lr = o.lr > 0 ? o.lr : spec.lr;
  // Data: every rank of the first and last stages reads its own rows.
  TrainingData data;
  openTrainingData(spec, o, *layout, data);
  const std::string &dataTokens = data.contents; // on the ranks that read the data
  // The streams first: every device operation from here on is enqueued on
  // the compute stream unless a piece of work says otherwise.
  Streams streams(o.overlap);
  StageMemory memory(stage,
                     ActivationStash::maxInFlight(interleavedOneFOneB(
                         layout->stage, int(spec.stages.size()), spec.gradAccum, stage.chunks)));
  OffloadEngine offload;
  ParameterStore store(
      stage, memory.global(), memory.layers(),
      {groups.tp(), groups.dp(), tied.whole.get(), tied.shards.get(), layout->isFirstStage()},
      offload, streams);
  drawInitialValues(store, o, hostOfRank, worldRank,
                    /*resumed=*/resumed.has_value() || initial.has_value());
  if (initial) {
    loadInitialWeights(*initial, stage, store);
    if (worldRank == 0) {
      const auto &meta = initial->file->metadata;
      const auto source = meta.find("source");
      std::printf("mistrt: initial weights from %s (%s)\n", initial->source.c_str(),
                  source != meta.end() ? source->second.c_str()
                                       : ("step " + meta.at("step") + " of its run").c_str());
    }
    initial.reset();
  }
  LrSchedule schedule = runSchedule(spec, o, lr);
  const int firstStep = resumed ? resumeFromCheckpoint(std::move(*resumed), spec, stage, store,
                                                       worldRank, o, dataTokens, schedule)
                                : 1;
  resumed.reset();
  store.settle();
  ActivationStash stash(stage, memory, offload, streams);
  streams.synchronize();
  printStageMemory(*layout, stage, memory, stash);
  StageRunner runner(spec, groups, tpContext, memory, store, stash, streams,
                     data.sampler ? &*data.sampler : nullptr);
  const int64_t samplesPerStep =
      int64_t(spec.stages[0].microBatch) * spec.stages[0].dp * spec.gradAccum;
  if (worldRank == 0)
    printRunHeader(spec, o, deviceName, ranks, lr, samplesPerStep, data);
  const RankTraining training{spec, stage, *layout, *world, groups, streams, store, runner};
  // --steps 0 --ckpt-dir D: the initial weights, e.g. to load into another framework.
  if (o.steps == 0 && !o.ckptDir.empty() && !o.resume)
    saveCheckpoint(o.ckptDir, spec, groups, *world, store, 0, o.seed, schedule,
                   runRecord(spec, o, 0, samplesPerStep, dataTokens));
  // --log-dir: rank 0 holds the loss, and writes what users plot.
  std::unique_ptr<MetricsLog> metrics;
  if (worldRank == 0 && !o.logDir.empty())
    metrics = std::make_unique<MetricsLog>(o.logDir, hostOfRank[0]);
  StopSignals stopSignals(worldRank); // from here a stop signal ends the run after its step
  for (int step = firstStep; step <= o.steps; ++step) {
    stopSignals.atStep(step);
    const float stepLr = schedule.at(step);
    const StepFigures f = trainStep(training, step, stepLr);
    folderLock.touch();
    if (worldRank == 0) {
      const StepRecord record =
          stepRecord(spec, utilizationPeakTflops(spec, deviceName), step, f.loss, f.norm, stepLr,
                     samplesPerStep, ranks, f.seconds, offload);
      if (step % o.logEvery == 0 || step == o.steps || step == firstStep)
        printStep(record);
      if (metrics)
        metrics->write(record); // every step, whatever --log-every prints
    }
    std::fflush(stdout);
    // A stop asked for (--stop-after, or a signal on any rank) saves first.
    const int signal = int(world->allReduceMax(double(stopSignals.received())));
    const bool stopHere = (o.stopAfter > 0 && step == o.stopAfter) || signal != 0;
    const bool saveNow =
        (o.ckptEvery > 0 && step % o.ckptEvery == 0) || step == o.steps || stopHere;
    if (!o.ckptDir.empty() && saveNow) {
      runPendingUpdate(training); // the checkpoint holds the step's updated state
      saveCheckpoint(o.ckptDir, spec, groups, *world, store, step, o.seed, schedule,
                     runRecord(spec, o, step, samplesPerStep, dataTokens));
    }
    if (stopHere || (o.abandonAfter > 0 && step == o.abandonAfter)) {
      runPendingUpdate(training);
      const std::string why = signal == SIGTERM   ? "SIGTERM"
                              : signal == SIGUSR1 ? "SIGUSR1"
                              : stopHere          ? "--stop-after"
                                                  : "--abandon-after: no checkpoint of this step";
      const std::string next = stopHere && !o.ckptDir.empty()
                                   ? "; resume with --ckpt-dir " + o.ckptDir + " --resume"
                                   : "";
      if (worldRank == 0)
        std::printf("stopping after step %d (%s)%s\n", step, why.c_str(), next.c_str());
      return 0;
    }
  }
  runPendingUpdate(training);
  reportStagePeaks(*layout, *world);
  writeTraceIfAsked(o, spec, *layout, *world, streams);
  return 0;
}

} // namespace mist::rt
