#!/usr/bin/env python3
"""Predicted vs published training throughput (issue 20, item 5).

Each entry is a published training run: the model, the cluster, the run's
parallel layout, micro-batch, batch and recomputation as its launch script
gives them, and the throughput its authors measured. The script writes the
model as a .mist file and the layout as a fixed plan, asks mistc for the
plan's report (`--plan ... --emit=report`) on a built-in preset, and compares
the predicted iteration time with the published one. Nothing here is fitted:
the presets' figures come from datasheets and micro-benchmarks
(stdlib/clusters/*.yaml name each source).

Usage: bench/fidelity/run.py [--mistc build/bin/mistc] [--json OUT.json | --record]

It prints the table; --json writes the results to OUT.json, --record to the
committed bench/results/fidelity.json (nothing is written otherwise, so a
run to look does not replace the record).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Each run: name, source, preset, model (hidden, heads, layers, vocabulary,
# sequence, Megatron's classic attention or flash), layout (tp, pp, nodes,
# GPUs per node used), micro-batch, global batch, full recomputation or
# none, and the published teraFLOP/s per GPU with the FLOP count it uses.

# Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
# Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473), Table 1: GPT models,
# vocabulary 51200, sequence 2048, mixed precision (fp16), full activation
# recomputation, dropout 0.1, unfused (non-flash) attention, on Selene (DGX
# A100 80GB nodes, 8x 200 Gb/s HDR InfiniBand per node). Layouts,
# micro-batches and batches from Megatron-LM's examples/sc21/run_table_1.sh;
# the published figure counts FLOPs with the paper's eq. 3, which includes
# the recomputed forward. Four runs use the interleaved schedule
# (--num-layers-per-virtual-pipeline-stage 5, 5, 3, 1: v = 3, 2, 2, 3 chunks
# per stage), written as the plan's virtual_stages. Megatron-LM then
# all-reduced the data-parallel gradients after the backward of the last
# micro-batch (training.py: `model_module.allreduce_gradients()` under
# --DDP-impl local, the default; --overlap-grad-reduce came in 2023), written
# as overlap_grad_reduce: false. Its loss upcast the logits to fp32 and ran
# the softmax as separate PyTorch ops (pretrain_gpt.py: vocab_parallel_cross_
# entropy(output.float(), labels) unless --fp16-lm-cross-entropy): written
# as the model's fused_loss = false.
MEGATRON_SC21 = "Narayanan et al. SC'21, Table 1; Megatron-LM examples/sc21/run_table_1.sh"
# The same paper's Table 2 (section 5.2) compares its layouts with ZeRO-3 and
# no model parallelism at a fixed batch on the same cluster: GPT-3 175B
# (hidden 12288, 96 heads, 96 layers) and the 530B model of Table 1 (20480,
# 128, 105). PTD-P rows: model-parallel size 96 (tp 8, pp 12) and 280 (tp 8,
# pp 35), micro-batch 1, batch 1536 and 2240; the schedule is not given, so
# Megatron-LM's default, plain 1F1B, is written. ZeRO-3 rows: DeepSpeed's
# ZeRO-3 inside Megatron-LM's code (the paper: "We integrated ZeRO into our
# codebase using the DeepSpeed Python library"), dp = every GPU, one
# micro-batch per iteration (micro-batch x GPUs = batch: 4 x 384 = 1536,
# 4 x 640 = 2560, the starred row that did not fit on 560 GPUs). Both sets:
# fp16, full recomputation (the activations of 96 unrecomputed layers do not
# fit), the FLOPs of eq. 3, the loss as in Table 1.
MEGATRON_SC21_T2 = "Narayanan et al. SC'21, Table 2, PTD-P rows"
DEEPSPEED_ZERO3_SC21 = "Narayanan et al. SC'21, Table 2, ZeRO-3 rows (DeepSpeed in Megatron-LM)"
# PyTorch 2.11 on the project's H100 (shared/reference/h100-measured.md,
# 2026-11-22; bench/h100/pytorch_gpt.py): one GPU, bf16 autocast, SDPA flash
# attention, fused AdamW, no dropout, vocabulary 50304; teraFLOP/s by the
# Megatron formula without recomputation (72 instead of 96). Eager runs
# one kernel per op with Python dispatching each (its overhead, which weighs
# most on small models, is not in the model: the trainer is C++);
# torch.compile also fuses elementwise ops, which the model does not.
PYTORCH_H100 = "PyTorch on our H100, shared/reference/h100-measured.md"
# The same script on our H200 (2026-11-27, PyTorch 2.11, torch.compile, median
# of 10 steps), and mistc's own bf16 trainer on the same card in the same call
# (bench/gpu/run-all.sh; its scalar memory-bound kernels, before their
# 16-byte loads), priced on dgx-h200-141g, whose figures come from that card's
# kernel micro-benchmarks, not from these steps.
PYTORCH_H200 = "PyTorch on our H200, bench/results/gpu-2026-11-27-h200/pytorch-reference.json"
MISTC_H200 = "mistc's trainer on our H200, bench/results/gpu-2026-11-27-h200/gpt3-trainer.json"
# NVIDIA/Megatron-LM README (main at d98e8a64, 2026-08-22), "Model table"
# (images/model_table.png): weak scaling of GPT models from 1.7B to 462B on
# H100 DGX nodes, dp 48 throughout, vocabulary 131072, sequence 4096, with
# --overlap-grad-reduce --overlap-param-gather (the distributed optimizer:
# ZeRO-1) and --tp-comm-overlap (so sequence parallelism); per-GPU teraFLOP/s
# as published (Megatron-LM's formula, the 72 form: no recomputation).
# The table gives hidden, heads, layers, tp, pp, GPUs and batch; what it
# does not give is assumed here, the same for every run: micro-batch 1, no
# recomputation, plain 1F1B (no virtual stages), no dropout, flash attention,
# bf16, and an untied LM head (the parameter counts, e.g. 1.75B for "1.7B",
# need one). The loss is Megatron-LM's default, unfused fp32 one
# (cross_entropy_loss_fusion defaults to False in model_parallel_config.py at
# that commit): fused_loss = false. LLM Foundry's MPT uses flash-attn's fused
# cross entropy (loss_fn: fused_crossentropy, its default), the PyTorch runs
# below F.cross_entropy on upcast logits (eager: unfused, priced fused as
# the model has no form for PyTorch's own sequence of kernels).
MEGATRON_H100 = "NVIDIA/Megatron-LM README at d98e8a64, images/model_table.png (H100 weak scaling)"
# Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
# Models" (MLSys'23, arXiv:2205.05198): sequence parallelism with selective
# activation recomputation on Selene, data-parallel size 1 (benchmark runs).
# Model FLOPs utilization as Megatron-LM's README published it (2e90a342,
# "Update numbers in README": 22B 41.5%, 175B 51.4%, 530B 56.0%, 1T 56.3% of
# 312 TFLOP/s, FLOPs by the 72 form); layouts from the paper's Table 3: tp 8
# and pp 1, 8, 35, 64 on 8, 64, 280 and 512 A100s, batch 4, 64, 280 and 512,
# micro-batch 4 for 22B and 1 otherwise, sequence 2048, dropout 0.1. What
# the model cannot write as the runs had it: selective recomputation
# recomputes Megatron's classic attention core (QK^T, softmax, dropout, the
# product with V) in the backward instead of keeping its s^2 activations. It
# is written as the classic attention without recomputation: the kernels the
# runs ran, less the recomputed core (so slightly fast), and the model then
# says the runs do not fit (it keeps the s^2 activations they did not).
# Written as flash attention instead (no s^2 activations, but the core as one
# kernel, its s^2 memory passes unpriced) they come out +23.8%, +4.3%, +1.8%
# and +1.9%. The schedule is not given: Megatron-LM's default, plain 1F1B.
MEGATRON_SP_A100 = "Korthikanti et al. 2022, Table 3 layouts; Megatron-LM README MFU at 2e90a342"

# mosaicml/llm-foundry, scripts/train/benchmarking/README.md (at c90b9b31),
# "MPT Training Benchmarks": MPT models trained with Composer and PyTorch
# FSDP on the MosaicML platform, tables "A100 80GB with 1600 Gbps node-node
# interconnect (RoCE)", "H100 80GB BF16" and its large-scale table. Each row
# gives the GPUs, micro-batch, gradient accumulation, global batch, the
# sharding (FULL_SHARD: ZeRO-3; SHARD_GRAD_OP: ZeRO-2), activation
# checkpointing (every layer) and the measured tokens/s. The models (the
# yamls in scripts/train/yamls/pretrain/): GPT blocks with biases, learned
# position embeddings, a tied head, exact GELU, vocabulary 50368, flash
# attention, heads chosen for head dim 128 (64 for 125M and 350M); the
# tables' parameter counts match this exactly (e.g. 1,315,950,592 for "1b").
# Rows at sequence 2048; the A100 rows all on one node (8 GPUs) but 70B, the
# H100 rows on 8 GPUs (3B: 16, the table's smallest) and three at 128.
LLM_FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md at c90b9b31"
MPT = {  # size: hidden, heads, layers
    "125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24),
    "1b": (2048, 16, 24), "3b": (2560, 20, 32), "7b": (4096, 32, 32),
    "13b": (5120, 40, 40), "30b": (7168, 56, 48), "70b": (8192, 64, 80),
}


def run(name, source, cluster, hidden, heads, layers, vocab, seq, classic, tp, pp, nodes, gpn,
        mbs, gbs, recompute, tflops, counts_recompute, note="", virtual=1, untied=False,
        sp_overlap=False, zero1=False, overlap_grad_reduce=True, zero=None, tokens_per_s=None,
        exact_gelu=False, fused_loss=True, sequence_parallel=False):
    """`zero`: 0-3 (ZeRO-1 where `zero1` and dp > 1 if not given); `tokens_per_s`: the
    published throughput when the source gives tokens/s instead of teraFLOP/s;
    `sp_overlap`: sequence parallelism with tp-communication overlap,
    `sequence_parallel`: without it."""
    if zero is None:
        zero = 1 if zero1 else 0
    return dict(overlap_grad_reduce=overlap_grad_reduce, zero=zero, tokens_per_s=tokens_per_s,
                exact_gelu=exact_gelu, fused_loss=fused_loss, name=name, source=source, cluster=cluster, hidden=hidden, heads=heads,
                layers=layers, vocab=vocab, seq=seq, classic=classic, tp=tp, pp=pp, nodes=nodes,
                gpn=gpn, mbs=mbs, gbs=gbs, recompute=recompute, tflops=tflops,
                counts_recompute=counts_recompute, note=note, virtual=virtual, untied=untied,
                sp_overlap=sp_overlap, zero1=zero1, sequence_parallel=sequence_parallel)


def megatron_run(name, hidden, heads, layers, tp, pp, nodes, mbs, gbs, tflops, virtual,
                 source=MEGATRON_SC21):
    """`virtual`: chunks per stage of the interleaved schedule (1: plain 1F1B)."""
    return run(name, source, "dgx-a100-80g", hidden, heads, layers, 51200, 2048, True, tp,
               pp, nodes, 8, mbs, gbs, True, tflops, True,
               f"interleaved 1F1B, {virtual} chunks per stage" if virtual > 1 else "",
               virtual, overlap_grad_reduce=False, fused_loss=False)


def megatron_sp_run(name, hidden, heads, layers, pp, mbs, gbs, mfu):
    """tp 8 with sequence parallelism, dp 1; `mfu` as published, of 312 TFLOP/s."""
    gpus = 8 * pp
    return run(name, MEGATRON_SP_A100, "dgx-a100-80g", hidden, heads, layers, 51200, 2048, True,
               8, pp, gpus // 8, 8, mbs, gbs, False, round(mfu * 312, 1), False,
               "SP; selective recompute priced as none", fused_loss=False,
               sequence_parallel=True)


def megatron_zero3_run(name, hidden, heads, layers, gpus, mbs, tflops):
    """One micro-batch per iteration on every GPU, ZeRO-3 over all of them."""
    return run(name, DEEPSPEED_ZERO3_SC21, "dgx-a100-80g", hidden, heads, layers, 51200, 2048,
               True, 1, 1, gpus // 8, 8, mbs, mbs * gpus, True, tflops, True, "ZeRO-3 (DeepSpeed)",
               zero=3, fused_loss=False)


def megatron_h100_run(name, heads, hidden, layers, tp, pp, gpus, gbs, tflops):
    return run(name, MEGATRON_H100, "dgx-h100-80g", hidden, heads, layers, 131072, 4096, False,
               tp, pp, gpus // 8, 8, 1, gbs, False, tflops, False,
               "SP + tp overlap, ZeRO-1" if tp > 1 else "ZeRO-1", untied=True,
               sp_overlap=tp > 1, zero1=True, fused_loss=False)


def llm_foundry_run(gpu, size, gpus, mbs, grad_accum, gbs, ckpt, tokens_per_s, shard):
    hidden, heads, layers = MPT[size]
    cluster = {"a100": "dgx-a100-80g", "h100": "dgx-h100-80g"}[gpu]
    zero = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2}[shard]
    assert gbs == mbs * grad_accum * gpus
    return run(f"mpt-{size}-{gpu}-{gpus}", LLM_FOUNDRY, cluster, hidden, heads, layers, 50368, 2048,
               False, 1, 1, max(1, gpus // 8), min(gpus, 8), mbs, gbs, ckpt, None, False,
               f"FSDP {'ZeRO-3' if zero == 3 else 'ZeRO-2'}" + (", ckpt" if ckpt else ""),
               zero=zero, tokens_per_s=tokens_per_s, exact_gelu=True)


def pytorch_run(name, hidden, heads, layers, seq, mbs, recompute, tflops, mode,
                source=PYTORCH_H100, cluster="dgx-h100-80g", who="PyTorch "):
    return run(name, source, cluster, hidden, heads, layers, 50304, seq, False, 1, 1,
               1, 1, mbs, mbs, recompute, tflops, False, who + mode)


RUNS = [
    megatron_run("gpt-1.7b", 2304, 24, 24, 1, 1, 4, 16, 512, 137, 1),
    megatron_run("gpt-3.6b", 3072, 32, 30, 2, 1, 8, 16, 512, 138, 1),
    megatron_run("gpt-7.5b", 4096, 32, 36, 4, 1, 16, 16, 512, 142, 1),
    megatron_run("gpt-18b", 6144, 48, 40, 8, 1, 32, 8, 1024, 135, 1),
    megatron_run("gpt-39b", 8192, 64, 48, 8, 2, 64, 4, 1536, 138, 1),
    megatron_run("gpt-76b", 10240, 80, 60, 8, 4, 128, 2, 1792, 140, 3),
    megatron_run("gpt-145b", 12288, 96, 80, 8, 8, 192, 2, 2304, 148, 2),
    megatron_run("gpt-310b", 16384, 128, 96, 8, 16, 240, 1, 2160, 155, 2),
    megatron_run("gpt-530b", 20480, 128, 105, 8, 35, 315, 1, 2520, 163, 3),
    megatron_run("gpt-1t", 25600, 160, 128, 8, 64, 384, 1, 3072, 163, 1),
    megatron_run("t2-175b-384", 12288, 96, 96, 8, 12, 48, 1, 1536, 153, 1, MEGATRON_SC21_T2),
    megatron_run("t2-175b-768", 12288, 96, 96, 8, 12, 96, 1, 1536, 149, 1, MEGATRON_SC21_T2),
    megatron_run("t2-175b-1536", 12288, 96, 96, 8, 12, 192, 1, 1536, 141, 1, MEGATRON_SC21_T2),
    megatron_run("t2-530b-560", 20480, 128, 105, 8, 35, 70, 1, 2240, 171, 1, MEGATRON_SC21_T2),
    megatron_run("t2-530b-1120", 20480, 128, 105, 8, 35, 140, 1, 2240, 167, 1, MEGATRON_SC21_T2),
    megatron_run("t2-530b-2240", 20480, 128, 105, 8, 35, 280, 1, 2240, 159, 1, MEGATRON_SC21_T2),
    megatron_zero3_run("z3-175b-384", 12288, 96, 96, 384, 4, 144),
    megatron_zero3_run("z3-175b-768", 12288, 96, 96, 768, 2, 88),
    megatron_zero3_run("z3-175b-1536", 12288, 96, 96, 1536, 1, 44),
    megatron_zero3_run("z3-530b-640", 20480, 128, 105, 640, 4, 138),
    megatron_zero3_run("z3-530b-1120", 20480, 128, 105, 1120, 2, 98),
    megatron_zero3_run("z3-530b-2240", 20480, 128, 105, 2240, 1, 48),
    megatron_sp_run("sp-22b", 6144, 64, 48, 1, 4, 4, 0.415),
    megatron_sp_run("sp-175b", 12288, 96, 96, 8, 1, 64, 0.514),
    megatron_sp_run("sp-530b", 20480, 128, 105, 35, 1, 280, 0.560),
    megatron_sp_run("sp-1t", 25600, 160, 128, 64, 1, 512, 0.563),
    megatron_h100_run("h100-1.7b", 16, 2048, 24, 1, 1, 48, 192, 408.8),
    megatron_h100_run("h100-7.1b", 32, 4096, 30, 2, 1, 96, 192, 465.9),
    megatron_h100_run("h100-16b", 48, 6144, 32, 4, 1, 192, 192, 489.1),
    megatron_h100_run("h100-32b", 56, 7168, 48, 8, 1, 384, 192, 459.6),
    megatron_h100_run("h100-70b", 64, 8192, 84, 8, 2, 768, 384, 419.7),
    megatron_h100_run("h100-119b", 80, 10240, 92, 8, 4, 1536, 768, 420.5),
    megatron_h100_run("h100-177b", 96, 12288, 96, 8, 6, 2304, 1152, 432.8),
    megatron_h100_run("h100-314b", 128, 16384, 96, 8, 8, 3072, 1536, 474.4),
    megatron_h100_run("h100-462b", 144, 18432, 112, 8, 16, 6144, 3072, 459.9),
    llm_foundry_run("a100", "125m", 8, 40, 2, 640, False, 1142641, "FULL_SHARD"),
    llm_foundry_run("a100", "350m", 8, 32, 2, 512, False, 470263, "FULL_SHARD"),
    llm_foundry_run("a100", "760m", 8, 24, 2, 384, False, 259472, "FULL_SHARD"),
    llm_foundry_run("a100", "1b", 8, 14, 4, 448, False, 164109, "FULL_SHARD"),
    llm_foundry_run("a100", "3b", 8, 10, 2, 160, False, 86491, "FULL_SHARD"),
    llm_foundry_run("a100", "7b", 8, 6, 2, 96, False, 37130, "FULL_SHARD"),
    llm_foundry_run("a100", "13b", 8, 2, 3, 48, False, 18097, "FULL_SHARD"),
    llm_foundry_run("a100", "30b", 8, 3, 21, 504, True, 7330, "FULL_SHARD"),
    llm_foundry_run("a100", "70b", 64, 8, 4, 2048, True, 26274, "FULL_SHARD"),
    llm_foundry_run("h100", "760m", 8, 24, 2, 384, False, 505177, "FULL_SHARD"),
    llm_foundry_run("h100", "1b", 8, 14, 1, 112, False, 363645, "FULL_SHARD"),
    llm_foundry_run("h100", "3b", 16, 10, 3, 480, False, 386285, "FULL_SHARD"),
    llm_foundry_run("h100", "7b", 8, 6, 1, 48, False, 85144, "FULL_SHARD"),
    llm_foundry_run("h100", "13b", 8, 2, 1, 16, False, 38336, "FULL_SHARD"),
    llm_foundry_run("h100", "30b", 8, 3, 21, 504, True, 16022, "FULL_SHARD"),
    llm_foundry_run("h100", "1b", 128, 12, 1, 1536, False, 5647854, "SHARD_GRAD_OP"),
    llm_foundry_run("h100", "7b", 128, 6, 1, 768, False, 1340830, "FULL_SHARD"),
    llm_foundry_run("h100", "70b", 128, 8, 1, 1024, True, 135490, "FULL_SHARD"),
    pytorch_run("gpt-125m", 768, 12, 12, 1024, 16, False, 250, "eager"),
    pytorch_run("gpt-125m-c", 768, 12, 12, 1024, 16, False, 396, "torch.compile"),
    pytorch_run("gpt3-1.3b", 2048, 16, 24, 2048, 4, False, 437, "eager"),
    pytorch_run("gpt3-1.3b-c", 2048, 16, 24, 2048, 4, False, 501, "torch.compile"),
    pytorch_run("gpt3-1.3b-ckpt", 2048, 16, 24, 2048, 8, True, 390, "eager"),
    pytorch_run("gpt3-2.7b", 2560, 32, 32, 2048, 4, False, 503, "torch.compile"),
    pytorch_run("gpt3-2.7b-ckpt", 2560, 32, 32, 2048, 8, True, 448, "torch.compile"),
    pytorch_run("h200-1.3b-c", 2048, 16, 24, 2048, 4, False, 546.3, "torch.compile",
                PYTORCH_H200, "dgx-h200-141g"),
    pytorch_run("h200-2.7b-c", 2560, 32, 32, 2048, 4, False, 531.6, "torch.compile",
                PYTORCH_H200, "dgx-h200-141g"),
    pytorch_run("h200-1.3b-mistc", 2048, 16, 24, 2048, 4, False, 521.6, "bf16 trainer",
                MISTC_H200, "dgx-h200-141g", "mistc "),
    pytorch_run("h200-2.7b-mistc", 2560, 32, 32, 2048, 4, False, 517.0, "bf16 trainer",
                MISTC_H200, "dgx-h200-141g", "mistc "),
]


def model_flops_per_iteration(r):
    """Megatron's eq. 3 (96: with the recomputed forward) or its 72 form."""
    B, s, L, h, V = r["gbs"], r["seq"], r["layers"], r["hidden"], r["vocab"]
    if r["counts_recompute"]:
        return 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    return 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))


def yaml_bool(b):
    return "true" if b else "false"


def write_case(folder, r):
    name = r["name"]
    model = "m_" + name.replace("-", "_").replace(".", "_")
    mist = os.path.join(folder, name + ".mist")
    attention = "dropout = 0.1, flash = false" if r["classic"] else "flash = true"
    head = ", tied_head = false" if r["untied"] else ""
    head += ", approximate_gelu = false" if r["exact_gelu"] else ""
    head += "" if r["fused_loss"] else ", fused_loss = false"
    with open(mist, "w") as f:
        f.write('import "gpt"\n')
        f.write(f"model {model} = gpt(vocab = {r['vocab']}, hidden = {r['hidden']}, "
                f"layers = {r['layers']}, heads = {r['heads']}, {attention}{head})\n")
        f.write(f"train {{\n  global_batch = {r['gbs']}\n  seq_len = {r['seq']}\n"
                "  optimizer = adamw(lr = 1e-4)\n}\n")
    tp, pp, gpus = r["tp"], r["pp"], r["nodes"] * r["gpn"]
    dp = gpus // (tp * pp)
    grad_accum = r["gbs"] // (r["mbs"] * dp)
    per_stage = r["layers"] // pp
    stage_gpus = gpus // pp
    mesh = (f"{{nodes: {stage_gpus // 8}, gpus_per_node: 8}}" if stage_gpus >= 8 else
            f"{{nodes: 1, gpus_per_node: {stage_gpus}}}")
    plan = os.path.join(folder, name + ".plan.yaml")
    with open(plan, "w") as f:
        f.write(f"mist_plan: 1\nmodel: {model}\ncluster: {r['cluster']}\n"
                f"global_batch: {r['gbs']}\ngrad_accum: {grad_accum}\n"
                + (f"virtual_stages: {r['virtual']}\n" if r["virtual"] > 1 else "")
                + ("sequence_parallel: true\ntp_comm_overlap: true\n" if r["sp_overlap"] else
                   "sequence_parallel: true\n" if r["sequence_parallel"] else "")
                + ("" if r["overlap_grad_reduce"] else "overlap_grad_reduce: false\n")
                + "stages:\n")
        for i in range(pp):
            f.write(f"  - layers: [{i * per_stage}, {(i + 1) * per_stage - 1}]\n"
                    f"    mesh: {mesh}\n    micro_batch: {r['mbs']}\n    dp: {dp}\n"
                    f"    tp: {tp}\n"
                    f"    zero: {{weights: {yaml_bool(dp > 1 and r['zero'] >= 3)}, "
                    f"grads: {yaml_bool(dp > 1 and r['zero'] >= 2)}, "
                    f"optimizer: {yaml_bool(dp > 1 and r['zero'] >= 1)}}}\n"
                    f"    ckpt_layers: {per_stage if r['recompute'] else 0}\n"
                    "    offload: {weights: 0.0, grads: 0.0, optimizer: 0.0, activations: 0.0}\n")
    return mist, plan


def predicted_iteration(mistc, mist, plan, cluster, nodes):
    out = subprocess.run([mistc, mist, "--cluster", cluster, "--nodes", str(nodes), "--plan", plan,
                          "--emit=report"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"mistc failed on {mist}:\n{out.stderr}")
    m = re.search(r"pipeline: iteration ([0-9.]+) s", out.stdout)
    fits = "every stage fits in memory" in out.stdout
    return float(m.group(1)), fits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--mistc", default=os.path.join(root, "build", "bin", "mistc"))
    ap.add_argument("--json", default=None, help="write the results to this file")
    ap.add_argument("--record", action="store_true",
                    help="write them to bench/results/fidelity.json, the committed record")
    ap.add_argument("--cluster", default=None,
                    help="price every run on this preset instead of its own (for comparisons)")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for r in RUNS:
            cluster = args.cluster or r["cluster"]
            r = dict(r, cluster=cluster)
            mist, plan = write_case(folder, r)
            predicted, fits = predicted_iteration(args.mistc, mist, plan, cluster, r["nodes"])
            gpus = r["nodes"] * r["gpn"]
            flops = model_flops_per_iteration(r)
            if r["tokens_per_s"]:
                published = r["gbs"] * r["seq"] / r["tokens_per_s"]
                r["tflops"] = round(flops / (published * 1e12 * gpus), 1)
            else:
                published = flops / (r["tflops"] * 1e12 * gpus)
            rows.append({
                "run": r["name"], "source": r["source"], "cluster": cluster, "gpus": gpus,
                "tp": r["tp"], "pp": r["pp"], "dp": gpus // (r["tp"] * r["pp"]),
                "micro_batch": r["mbs"], "global_batch": r["gbs"], "recompute": r["recompute"],
                "published_tflops_per_gpu": r["tflops"],
                "published_iteration_s": round(published, 4),
                "predicted_iteration_s": predicted,
                "predicted_tflops_per_gpu": round(flops / (predicted * 1e12 * gpus), 1),
                # Throughput error: predicted / published throughput - 1.
                "error": round(published / predicted - 1, 4),
                "note": r["note"], "fits": fits,
            })

    print(f"{'run':15} {'GPUs':>5} {'tp':>3} {'pp':>3} {'published':>10} {'predicted':>10} "
          f"{'error':>7}  note")
    for r in rows:
        note = r["note"] + ("" if r["fits"] else " (predicted not to fit)")
        print(f"{r['run']:15} {r['gpus']:5} {r['tp']:3} {r['pp']:3} "
              f"{r['published_tflops_per_gpu']:>7} TF {r['predicted_tflops_per_gpu']:>7} TF "
              f"{100 * r['error']:+6.1f}%  {note}")

    def summary(sel):
        errs = [abs(r["error"]) for r in sel]
        return {"runs": len(errs), "mean_abs_error": round(sum(errs) / len(errs), 4),
                "worst_abs_error": round(max(errs), 4)} if errs else {}

    groups = {"all": rows,
              "megatron_sc21_a100": [r for r in rows if r["source"] == MEGATRON_SC21],
              "megatron_sc21_table2_ptdp": [r for r in rows if r["source"] == MEGATRON_SC21_T2],
              "deepspeed_zero3_sc21": [r for r in rows if r["source"] == DEEPSPEED_ZERO3_SC21],
              "megatron_sp_a100": [r for r in rows if r["source"] == MEGATRON_SP_A100],
              "megatron_h100_readme": [r for r in rows if r["source"] == MEGATRON_H100],
              "pytorch_h100": [r for r in rows if r["source"] == PYTORCH_H100],
              "pytorch_h100_compile": [r for r in rows if r["note"] == "PyTorch torch.compile"
                                       and r["source"] == PYTORCH_H100],
              "pytorch_h200_compile": [r for r in rows if r["source"] == PYTORCH_H200],
              "mistc_trainer_h200": [r for r in rows if r["source"] == MISTC_H200],
              "megatron_interleaved": [r for r in rows if "interleaved" in r["note"]],
              "llm_foundry_a100": [r for r in rows
                                   if r["source"] == LLM_FOUNDRY and r["cluster"] == "dgx-a100-80g"],
              "llm_foundry_h100": [r for r in rows
                                   if r["source"] == LLM_FOUNDRY and r["cluster"] == "dgx-h100-80g"]}
    result = {name: summary(sel) for name, sel in groups.items()}
    result["runs"] = rows
    for name in groups:
        g = result[name]
        print(f"{name:26} {g['runs']:3} runs: mean |error| {100 * g['mean_abs_error']:5.1f}%, "
              f"worst {100 * g['worst_abs_error']:5.1f}%")
    out = os.path.join(root, "bench", "results", "fidelity.json") if args.record else args.json
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"written to {out}")


if __name__ == "__main__":
    sys.exit(main())
