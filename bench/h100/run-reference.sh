#!/usr/bin/env bash
# PyTorch reference for mistc's GPU throughput claims: GPT-3 1.3B and 2.7B, micro-batch 4,
# seq 2048, eager and torch.compile, on one GPU. Writes bench/results/h100-pytorch-reference.json
# (a list of the result objects of bench/h100/pytorch_gpt.py) and prints a table.
#
# Run from anywhere on the GPU machine (no network needed, PyTorch must be installed):
#   bash bench/h100/run-reference.sh
# Environment overrides: PYTHON (python3), STEPS (10), WARMUP (3), GRAD_ACCUM (1),
# MODELS ("gpt3-1.3b gpt3-2.7b"), MODES ("eager compile"), MICRO_BATCH (4), OUT (the JSON path).
# Exits 77 (the "skipped" code of ctest and the project's GPU tests) when there is no CUDA GPU.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
STEPS="${STEPS:-10}"
WARMUP="${WARMUP:-3}"
GRAD_ACCUM="${GRAD_ACCUM:-1}"
MICRO_BATCH="${MICRO_BATCH:-4}"
MODELS="${MODELS:-gpt3-1.3b gpt3-2.7b}"
MODES="${MODES:-eager compile}"
OUT="${OUT:-$root/bench/results/h100-pytorch-reference.json}"

if ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  echo "run-reference.sh: no usable CUDA GPU: \`$PYTHON -c 'import torch; assert torch.cuda.is_available()'\` failed" >&2
  echo "run-reference.sh: this measures the PyTorch reference on the GPU machine (H100); nothing was run" >&2
  exit 77
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

n=0
failed=0
for model in $MODELS; do
  for mode in $MODES; do
    n=$((n + 1))
    out="$tmp/$(printf '%02d' "$n")-$model-$mode.json"
    echo "=== $model $mode (micro-batch $MICRO_BATCH, grad-accum $GRAD_ACCUM, $WARMUP warmup + $STEPS timed iterations)"
    # Each run in its own process so that peak memory and compile caches do not carry over.
    if ! "$PYTHON" "$here/pytorch_gpt.py" --model "$model" --mode "$mode" --device cuda \
         --micro-batch "$MICRO_BATCH" --grad-accum "$GRAD_ACCUM" \
         --steps "$STEPS" --warmup "$WARMUP" --json "$out"; then
      if [ -s "$out" ]; then
        echo "run-reference.sh: $model $mode did not fit in GPU memory (recorded as such)" >&2
      else
        echo "run-reference.sh: $model $mode failed" >&2
        failed=$((failed + 1))
      fi
    fi
  done
done

mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$OUT" "$tmp" <<'EOF'
import glob, json, os, sys
out, tmp = sys.argv[1], sys.argv[2]
rows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(tmp, "*.json")))]
if not rows:
    sys.exit(f"run-reference.sh: no run produced a result; {out} left as it was")
with open(out, "w") as f:
    json.dump(rows, f, indent=2)
    f.write("\n")
print()
print(f"{'model':<11} {'mode':<8} {'ms/iter':>8} {'TFLOP/s':>8} {'MFU':>6} {'GiB':>6}")
for r in rows:
    gib = "-" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
    if r.get("error"):
        label = "OOM" if r["error"] == "out of memory" else "error"
        print(f"{r['model']:<11} {r['mode']:<8} {label:>8} {'-':>8} {'-':>6} {gib:>6}")
        continue
    mfu = "-" if r.get("mfu_vs_989_tflops") is None else f"{100 * r['mfu_vs_989_tflops']:.1f}%"
    print(f"{r['model']:<11} {r['mode']:<8} {r['iteration_s_median'] * 1e3:>8.1f} {r['tflops']:>8.1f} {mfu:>6} {gib:>6}")
if rows:
    print(f"\n{rows[0]['device_name']}, torch {rows[0]['torch_version']}; wrote {out}")
EOF

if [ "$failed" -ne 0 ]; then
  echo "run-reference.sh: $failed run(s) failed (see above)" >&2
  exit 1
fi
