#!/usr/bin/env bash
# The generated CPU trainer against PyTorch eager on the same cores, side by
# side in one run: a 4-layer GPT (vocab 256, hidden 256, 4 heads), sequence
# 256, micro-batch 8, global batch 16, the same step-0 weights (PyTorch loads
# the trainer's --steps 0 checkpoint), the same synthetic sequences and
# AdamW hyper-parameters, in fp32 and in bf16 (PyTorch: torch.autocast).
# Rows: 1 rank vs 1 thread; 2 ranks (dp 2) vs 2 threads; and, for
# reference, 1 rank with --threads 2. Each time is the median step time of
# steps 3..N (the first two warm up); the ratio is the trainer's tokens/s
# over PyTorch's. The losses of both are printed beside: the same model on
# the same data agrees to rounding, so the comparison is like for like.
#   vs-pytorch.sh MISTC [OUT.json]      (default bench/results/cpu-vs-pytorch.json)
# PyTorch: $MIST_TORCH_PYTHON, else the exports venv ($MIST_EXPORTS_VENV or
# .venv-exports), else a venv the script makes (.venv-bench, pip install
# torch safetensors; STEPS=N sets the steps, default 8). Writes the table to
# OUT.txt beside the JSON. Exits 77 (skipped)
# with a message when no PyTorch can be had. Run it on an idle machine.
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: vs-pytorch.sh MISTC [OUT.json]" >&2; exit 2; }
mistc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/bench/results/cpu-vs-pytorch.json}
steps=${STEPS:-8}
python=${MIST_TORCH_PYTHON:-${MIST_EXPORTS_VENV:-$root/.venv-exports}/bin/python}
if ! "$python" -c "import torch, safetensors" 2>/dev/null; then
  python=$root/.venv-bench/bin/python
  if ! "$python" -c "import torch, safetensors" 2>/dev/null; then
    echo "vs-pytorch.sh: installing PyTorch into $root/.venv-bench"
    { python3 -m venv "$root/.venv-bench" &&
      { "$root/.venv-bench/bin/pip" install -q torch safetensors \
          --index-url https://download.pytorch.org/whl/cpu 2>/dev/null ||
        "$root/.venv-bench/bin/pip" install -q torch safetensors; }; } ||
      { echo "vs-pytorch.sh: PyTorch could not be installed: skipped"; exit 77; }
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for dtype in f32 bf16; do
  cat >"$work/gpt-$dtype.mist" <<MODEL
import "gpt"
model bench_gpt = gpt(vocab = 256, hidden = 256, layers = 4, heads = 4)
train {
  global_batch = 16
  seq_len = 256
  dtype = $dtype
  optimizer = adamw(lr = 1e-3, betas = (0.9, 0.95), weight_decay = 0.1)
}
MODEL
done
for dp in 1 2; do
  cat >"$work/dp$dp.yaml" <<PLAN
mist_plan: 1
model: bench_gpt
cluster: a100-40g
global_batch: 16
grad_accum: $((2 / dp))
stages:
  - layers: [0, 3]
    mesh: {nodes: 1, gpus_per_node: $dp}
    micro_batch: 8
    dp: $dp
    tp: 1
PLAN
done

# median_step LOG: the median seconds per step of steps 3.., from the trainer's tokens/s.
trainer_times() {
  python3 - "$1" <<'PY'
import json, sys
times, losses = [], []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) > 9 and f[0] == "step":
        losses.append(float(f[3]))
        times.append(16 * 256 / float(f[f.index("tokens/s") - 1]))
print(json.dumps({"step_seconds": times, "losses": losses}))
PY
}

rows=()
for dtype in f32 bf16; do
  for dp in 1 2; do
    "$root/scripts/build-trainer.sh" "$mistc" "$work/gpt-$dtype.mist" "$work/dp$dp.yaml" \
      "$work/train-$dtype-dp$dp" >/dev/null 2>&1
  done
  mpirun -np 1 "$work/train-$dtype-dp1" --steps 0 --ckpt-dir "$work/ckpt-$dtype" >/dev/null
  run_trainer() { # name ranks threads
    mpirun -np "$2" --bind-to none "$work/train-$dtype-dp$2" --steps "$steps" --threads "$3" \
      >"$work/$1.log"
    trainer_times "$work/$1.log" >"$work/$1.json"
  }
  run_pytorch() { # name threads
    # PyTorch's bf16 autocast is 10-20x slower than its fp32 on CPUs without
    # AVX-512-BF16: TORCH_BF16_STEPS (default 5) bounds its run.
    local n=$steps
    [[ $dtype == bf16 ]] && n=$((steps < ${TORCH_BF16_STEPS:-5} ? steps : ${TORCH_BF16_STEPS:-5}))
    "$python" "$root/bench/cpu/pytorch_gpt_step.py" --checkpoint "$work/ckpt-$dtype/optimizer.safetensors" \
      --threads "$2" --dtype "$dtype" --steps "$steps" --stop-after "$n" --json "$work/$1.json"
  }
  echo "== $dtype: 1 rank vs 1 thread" >&2
  run_trainer "mistc-$dtype-1x1" 1 1
  run_pytorch "torch-$dtype-1" 1
  echo "== $dtype: 2 ranks vs 2 threads" >&2
  run_trainer "mistc-$dtype-2x1" 2 1
  run_pytorch "torch-$dtype-2" 2
  echo "== $dtype: 1 rank, 2 threads" >&2
  run_trainer "mistc-$dtype-1x2" 1 2
  rows+=("$dtype 1x1 1" "$dtype 2x1 2" "$dtype 1x2 2")
done
grep -m1 '^mistrt: ops:' "$work/mistc-f32-1x1.log" >"$work/ops.txt" || true
lscpu >"$work/lscpu.txt"

python3 - "$work" "$out" "${rows[@]}" <<'PY' | tee "${out%.json}.txt"
import json, statistics, sys
work, out, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
load = lambda name: json.load(open(f"{work}/{name}.json"))
cpu = {k.strip(): v.strip() for k, v in
       (l.split(":", 1) for l in open(f"{work}/lscpu.txt") if ":" in l)}
flags = cpu.get("Flags", "").split()
isa = "avx512f" if "avx512f" in flags else ("avx2" if "avx2" in flags else "baseline")
results = []
print(f"CPU: {cpu.get('Model name', '?')} ({isa}); {open(f'{work}/ops.txt').read().strip()}")
print(f"{'dtype':5} {'trainer':22} {'tokens/s':>9} {'PyTorch eager':16} {'tokens/s':>9} "
      f"{'ratio':>6}  {'loss (trainer / PyTorch)'}")
for row in rows:
    dtype, layout, threads = row.split()
    ranks, per_rank = layout.split("x")
    mine = load(f"mistc-{dtype}-{layout}")
    theirs = load(f"torch-{dtype}-{threads}") if layout != "1x2" else None
    t_mine = statistics.median(mine["step_seconds"][2:])
    tokens = 16 * 256
    r = {"dtype": dtype, "ranks": int(ranks), "threads_per_rank": int(per_rank),
         "trainer_step_seconds": t_mine, "trainer_tokens_per_s": tokens / t_mine,
         "trainer_losses": mine["losses"], "trainer_step_seconds_all": mine["step_seconds"]}
    line = f"{dtype:5} {ranks + ' rank(s) x ' + per_rank + ' thr':22} {tokens / t_mine:9.0f} "
    if theirs:
        last = min(len(mine["losses"]), len(theirs["losses"]))  # PyTorch bf16 may stop early
        t_theirs = statistics.median(theirs["step_seconds"][2:])
        r.update({"pytorch_threads": int(threads), "pytorch_step_seconds": t_theirs,
                  "pytorch_tokens_per_s": tokens / t_theirs, "ratio": t_theirs / t_mine,
                  "pytorch_losses": theirs["losses"], "torch": theirs["torch"],
                  "pytorch_step_seconds_all": theirs["step_seconds"]})
        line += (f"{threads + ' thread(s)':16} {tokens / t_theirs:9.0f} {t_theirs / t_mine:6.2f}  "
                 f"{mine['losses'][last - 1]:.5f} / {theirs['losses'][last - 1]:.5f} (step {last})")
    else:
        line += f"{'-':16} {'':9} {'':6}  {mine['losses'][-1]:.5f}"
    print(line)
    results.append(r)
json.dump({"cpu": cpu.get("Model name"), "isa": isa, "ops": open(f"{work}/ops.txt").read().strip(),
           "model": "gpt vocab 256 hidden 256 layers 4 heads 4, seq 256, micro-batch 8, global 16",
           "steps": len(results[0]["trainer_losses"]), "rows": results},
          open(out, "w"), indent=1)
print(f"written {out}")
PY
