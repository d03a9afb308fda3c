//===- DeepSpeedExport.cpp - A DeepSpeed JSON config for a plan -----------===//
/// \file
/// Targets DeepSpeed 0.19 (checked with its DeepSpeedConfig and the engine's
/// optimizer check: bench/exports/check-exports.py). JSON has no comments:
/// what the projection changed, its predicted cost and what DeepSpeed takes
/// from model code (the pipeline, which layers recompute) go to stderr and
/// to a "mistc" object, which DeepSpeed's parser ignores.
//===----------------------------------------------------------------------===//
#include "backend/exports/ExportProjection.h"

#include <fmt/format.h>

using namespace mist;

namespace {

/// A JSON string literal.
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

void writeLines(const char *key, const std::vector<std::string> &lines, llvm::raw_ostream &os) {
  os << fmt::format("    \"{}\": [", key);
  for (size_t i = 0; i < lines.size(); ++i)
    os << (i ? ",\n      " : "\n      ") << quoted(lines[i]);
  os << (lines.empty() ? "]" : "\n    ]");
}

} // namespace

void mist::writeDeepSpeedConfig(const ExportProjection &projected, const ExportModel &model,
                                llvm::raw_ostream &os) {
  const Plan &p = projected.plan;
  const StagePlan &s0 = p.stages.front();
  const TrainConfig &t = model.train;
  const int stage = s0.zero.weights ? 3 : s0.zero.grads ? 2 : s0.zero.optimizer ? 1 : 0;
  os << "{\n";
  os << fmt::format("  \"train_batch_size\": {},\n", p.globalBatch);
  os << fmt::format("  \"train_micro_batch_size_per_gpu\": {},\n", s0.microBatch);
  os << fmt::format("  \"gradient_accumulation_steps\": {},\n", p.gradAccum);
  os << fmt::format("  \"gradient_clipping\": {:g},\n", t.gradClip);
  if (t.dtype != DType::F32) {
    os << fmt::format("  \"{}\": {{\"enabled\": true}},\n",
                      t.dtype == DType::BF16 ? "bf16" : "fp16");
    os << fmt::format("  \"data_types\": {{\"grad_accum_dtype\": \"{}\"}},\n",
                      torchDtypeShortName(t.gradientDtype()));
  }
  os << fmt::format(
      "  \"optimizer\": {{\"type\": \"AdamW\", \"params\": {{\"lr\": {:g}, \"betas\": [{:g}, "
      "{:g}], \"eps\": {:g}, \"weight_decay\": {:g}}}}},\n",
      t.lr, t.beta1, t.beta2, t.eps, t.weightDecay);
  os << "  \"zero_optimization\": {\n";
  os << fmt::format("    \"stage\": {},\n", stage);
  os << fmt::format("    \"overlap_comm\": {},\n", p.overlapGradReduce);
  os << "    \"contiguous_gradients\": true";
  if (s0.offload.optimizer > 0)
    os << fmt::format(",\n    \"offload_optimizer\": {{\"device\": \"cpu\", \"pin_memory\": true, "
                      "\"ratio\": {:g}}}",
                      s0.offload.optimizer);
  if (s0.offload.weights > 0)
    os << ",\n    \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}";
  os << "\n  },\n";
  // Which layers recompute is model code's choice (deepspeed.checkpointing.
  // checkpoint around them: the remarks say which); these settings only
  // shape how the checkpointed activations are kept.
  os << "  \"activation_checkpointing\": {\n";
  os << fmt::format("    \"partition_activations\": {},\n", s0.tp > 1 ? "true" : "false");
  os << "    \"cpu_checkpointing\": false\n";
  os << "  },\n";
  // One stage: DeepSpeed's AutoTP shards a Hugging Face model itself. A
  // pipeline: PipelineModule's layers are model code, whose tp (Megatron-
  // DeepSpeed's) DeepSpeed leaves alone; AutoTP there fails ("Not able to
  // determine model policy").
  if (s0.tp > 1 && p.stages.size() == 1)
    os << fmt::format("  \"tensor_parallel\": {{\"autotp_size\": {}}},\n", s0.tp);
  // DeepSpeed checks train_batch_size = micro x accumulation x its count of
  // data-parallel ranks, which it takes from the mpu (or a pipeline's
  // topology) given to deepspeed.initialize, else from the world size: with
  // tp or pp that must be the plan's topology.
  const int stages = int(p.stages.size());
  const int world = stages * s0.tp * s0.dp;
  os << "  \"mistc\": {\n";
  os << fmt::format("    \"model\": {},\n", quoted(model.name));
  os << fmt::format(
      "    \"topology\": {{\"pipe\": {}, \"model\": {}, \"data\": {}, \"world\": {}}},\n", stages,
      s0.tp, s0.dp, world);
  writeLines("projection", projected.notes, os);
  os << ",\n";
  std::vector<std::string> remarks = projected.remarks;
  if (stages == 1 && s0.tp > 1)
    remarks.push_back(fmt::format(
        "topology: {} ranks as tp {} x dp {}; DeepSpeed checks train_batch_size {} = micro-batch "
        "{} x accumulation {} x dp {} with the data-parallel size of the mpu "
        "deepspeed.initialize gets: deepspeed.utils.groups after "
        "groups._init_tp_mesh_device(tensor_model_parallel_size={}), passed as mpu=groups; "
        "tensor_parallel.autotp_size then shards a Hugging Face model of a family AutoTP knows "
        "(Llama, not GPT-2); without the mpu DeepSpeed counts all {} ranks as data parallel and "
        "refuses this config",
        world, s0.tp, s0.dp, p.globalBatch, s0.microBatch, p.gradAccum, s0.dp, s0.tp, world));
  else if (stages > 1)
    remarks.push_back(fmt::format(
        "topology: {} ranks as {} pipeline stages x tp {} x dp {}; DeepSpeed checks "
        "train_batch_size {} = micro-batch {} x accumulation {} x dp {} with the data-parallel "
        "size of the mpu or topology deepspeed.initialize gets: "
        "PipelineModule(..., topology=PipeModelDataParallelTopology(num_pp={}, num_mp={}, "
        "num_dp={})), or Megatron-DeepSpeed's mpu (--tensor-model-parallel-size {} "
        "--pipeline-model-parallel-size {}); without one it counts all {} ranks as data "
        "parallel and refuses this config",
        world, stages, s0.tp, s0.dp, p.globalBatch, s0.microBatch, p.gradAccum, s0.dp, stages,
        s0.tp, s0.dp, s0.tp, stages, world));
  if (std::string decay = weightDecayRemark(model.train, ExportTarget::DeepSpeed); !decay.empty())
    remarks.push_back(decay);
  writeLines("remarks", remarks, os);
  os << "\n  }\n}\n";
}
