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

Usage: bench/fidelity/run.py [--mistc build/bin/mistc] [--json bench/results/fidelity.json]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
# Clusters Using Megatron-LM", SC'21 (arXiv:2104.04473), Table 1: GPT models,
# vocabulary 51200, sequence 2048, mixed precision (fp16), full activation
# recomputation, on Selene (DGX A100 80GB nodes, 8x 200 Gb/s HDR InfiniBand
# per node). Layouts, micro-batches and batches from Megatron-LM's
# examples/sc21/run_table_1.sh; the published figure is teraFLOP/s per GPU
# counted with the paper's formula (eq. 3), which includes the recomputed
# forward. Runs the script launches with the interleaved schedule
# (--num-layers-per-virtual-pipeline-stage) are marked: mistc does not yet
# write that schedule (issue 20 item 3) and prices plain 1F1B instead.
MEGATRON_SC21 = "Narayanan et al. SC'21, Table 1; Megatron-LM examples/sc21/run_table_1.sh"
RUNS = [
    # name, hidden, heads, layers, tp, pp, nodes, micro-batch, batch, TFLOP/s per GPU, interleaved
    ("gpt-1.7b", 2304, 24, 24, 1, 1, 4, 16, 512, 137, False),
    ("gpt-3.6b", 3072, 32, 30, 2, 1, 8, 16, 512, 138, False),
    ("gpt-7.5b", 4096, 32, 36, 4, 1, 16, 16, 512, 142, False),
    ("gpt-18b", 6144, 48, 40, 8, 1, 32, 8, 1024, 135, False),
    ("gpt-39b", 8192, 64, 48, 8, 2, 64, 4, 1536, 138, False),
    ("gpt-76b", 10240, 80, 60, 8, 4, 128, 2, 1792, 140, True),
    ("gpt-145b", 12288, 96, 80, 8, 8, 192, 2, 2304, 148, True),
    ("gpt-310b", 16384, 128, 96, 8, 16, 240, 1, 2160, 155, True),
    ("gpt-530b", 20480, 128, 105, 8, 35, 315, 1, 2520, 163, True),
    ("gpt-1t", 25600, 160, 128, 8, 64, 384, 1, 3072, 163, False),
]
VOCAB, SEQ = 51200, 2048


def megatron_flops_per_iteration(batch, seq, layers, hidden, vocab):
    """The paper's eq. 3: FLOPs of one iteration with full recomputation."""
    return 96 * batch * seq * layers * hidden**2 * (
        1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def write_case(folder, name, hidden, heads, layers, tp, pp, nodes, mbs, gbs, cluster):
    model = name.replace("-", "_").replace(".", "_")
    mist = os.path.join(folder, name + ".mist")
    with open(mist, "w") as f:
        f.write('import "gpt"\n')
        f.write(f"model {model} = gpt(vocab = {VOCAB}, hidden = {hidden}, layers = {layers}, "
                f"heads = {heads}, dropout = 0.1, flash = false)\n")
        f.write(f"train {{\n  global_batch = {gbs}\n  seq_len = {SEQ}\n"
                "  optimizer = adamw(lr = 1e-4)\n}\n")
    gpus = nodes * 8
    dp = gpus // (tp * pp)
    grad_accum = gbs // (mbs * dp)
    per_stage, stage_nodes = layers // pp, nodes // pp
    plan = os.path.join(folder, name + ".plan.yaml")
    with open(plan, "w") as f:
        f.write(f"mist_plan: 1\nmodel: {model}\ncluster: {cluster}\nglobal_batch: {gbs}\n"
                f"grad_accum: {grad_accum}\nstages:\n")
        for i in range(pp):
            mesh = (f"{{nodes: {stage_nodes}, gpus_per_node: 8}}" if stage_nodes >= 1 else
                    f"{{nodes: 1, gpus_per_node: {gpus // pp}}}")
            f.write(f"  - layers: [{i * per_stage}, {(i + 1) * per_stage - 1}]\n"
                    f"    mesh: {mesh}\n    micro_batch: {mbs}\n    dp: {dp}\n    tp: {tp}\n"
                    "    zero: {weights: false, grads: false, optimizer: false}\n"
                    f"    ckpt_layers: {per_stage}\n"
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
    ap.add_argument("--json", default=os.path.join(root, "bench", "results", "fidelity.json"))
    ap.add_argument("--cluster", default="dgx-a100-80g")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, h, heads, layers, tp, pp, nodes, mbs, gbs, tflops, interleaved in RUNS:
            mist, plan = write_case(folder, name, h, heads, layers, tp, pp, nodes, mbs, gbs,
                                    args.cluster)
            predicted, fits = predicted_iteration(args.mistc, mist, plan, args.cluster, nodes)
            flops = megatron_flops_per_iteration(gbs, SEQ, layers, h, VOCAB)
            published = flops / (tflops * 1e12 * nodes * 8)
            rows.append({
                "run": name, "source": MEGATRON_SC21, "cluster": args.cluster,
                "gpus": nodes * 8, "tp": tp, "pp": pp, "dp": nodes * 8 // (tp * pp),
                "micro_batch": mbs, "global_batch": gbs,
                "published_tflops_per_gpu": tflops,
                "published_iteration_s": round(published, 4),
                "predicted_iteration_s": predicted,
                "predicted_tflops_per_gpu": round(flops / (predicted * 1e12 * nodes * 8), 1),
                # Throughput error: predicted / published throughput - 1.
                "error": round(published / predicted - 1, 4),
                "interleaved_published": interleaved, "fits": fits,
            })

    print(f"{'run':10} {'GPUs':>5} {'tp':>3} {'pp':>3} {'published':>10} {'predicted':>10} "
          f"{'error':>7}  note")
    for r in rows:
        note = "published run interleaved; priced as 1F1B" if r["interleaved_published"] else ""
        if not r["fits"]:
            note += " predicted not to fit"
        print(f"{r['run']:10} {r['gpus']:5} {r['tp']:3} {r['pp']:3} "
              f"{r['published_tflops_per_gpu']:>7} TF {r['predicted_tflops_per_gpu']:>7} TF "
              f"{100 * r['error']:+6.1f}%  {note}")

    def summary(sel):
        errs = [abs(r["error"]) for r in sel]
        return {"runs": len(errs), "mean_abs_error": round(sum(errs) / len(errs), 4),
                "worst_abs_error": round(max(errs), 4)} if errs else {}

    plain = [r for r in rows if not r["interleaved_published"]]
    result = {"cluster": args.cluster, "all": summary(rows), "same_schedule": summary(plain),
              "runs": rows}
    print(f"mean |error| {100 * result['all']['mean_abs_error']:.1f}%, worst "
          f"{100 * result['all']['worst_abs_error']:.1f}% over {len(rows)} runs; "
          f"runs with the published schedule: mean {100 * result['same_schedule']['mean_abs_error']:.1f}%, "
          f"worst {100 * result['same_schedule']['worst_abs_error']:.1f}%")
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
