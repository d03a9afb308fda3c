#!/usr/bin/env bash
# A tuned plan for a large model trains: tunes MODEL on CLUSTER x NODES with
# the knobs the trainer runs (sequence parallelism, interleaving), then
# trains a tiny stand-in of the same plan shape on CPU ranks (as many ranks
# as the plan has GPUs; every stage's dp, tp, micro-batch, ZeRO, offload and
# checkpointing as tuned, two layers per model chunk, G = 2 x stages) and
# checks it against the stand-in's one-rank run with equivalence.sh.
#   tuned-standin.sh MISTC MODEL.mist CLUSTER NODES TINY.mist WORK
# TINY.mist is a model whose `layers = N` and `global_batch = N` the script
# sets (tests/trainer/Inputs/tiny-llama-4l.mist).
set -euo pipefail
[[ $# -eq 6 ]] || { echo "usage: tuned-standin.sh MISTC MODEL.mist CLUSTER NODES TINY.mist WORK" >&2; exit 2; }
mistc=$1 model=$2 cluster=$3 nodes=$4 tiny=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
"$mistc" "$model" --cluster "$cluster" --nodes "$nodes" --sequence-parallel --interleave \
  --emit=plan --quiet -o "$work/tuned.yaml"
# The tuned plan as equivalence.sh's plan spec, and the stand-in's sizes.
read -r spec layers batch reference < <(python3 - "$work/tuned.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def key(name, block, default=None):
    m = re.search(rf"^\s*{name}:\s*(.+)$", block, re.M)
    return m.group(1).strip() if m else default
head, *stages = re.split(r"^\s*- layers:", text, flags=re.M)
v = int(key("virtual_stages", head, "1"))
sp = key("sequence_parallel", head, "false") == "true"
parts, ranks = [], 0
for s in stages:
    dp, tp, b = (int(key(k, s)) for k in ("dp", "tp", "micro_batch"))
    zero = re.search(r"zero:\s*\{weights:\s*(\w+),\s*grads:\s*(\w+),\s*optimizer:\s*(\w+)\}", s)
    level = 3 if zero.group(1) == "true" else 2 if zero.group(2) == "true" else 1 if zero.group(3) == "true" else 0
    off = re.search(r"offload:\s*\{weights:\s*([\d.]+),\s*grads:\s*([\d.]+),\s*optimizer:\s*([\d.]+),\s*activations:\s*([\d.]+)\}", s)
    tiny_layers = 2 * v  # two layers per model chunk
    ckpt = min(int(key("ckpt_layers", s, "0")), tiny_layers)
    offload = ",".join(f"{float(x):g}" for x in off.groups())
    parts.append(f"{tiny_layers}:{dp}:{tp}:{b}:{ckpt}:{level}:{offload}")
    ranks += dp * tp
g = 2 * len(stages)
first = stages[0]
dp0, b0 = int(key("dp", first)), int(key("micro_batch", first))
head_spec = f"{g}" + (f"@{v}" if v > 1 else "") + ("+sp" if sp else "")
total_layers = 2 * v * len(stages)
batch = g * b0 * dp0
# The one-rank reference: the same global batch in G micro-batches.
print(head_spec + "/" + "/".join(parts), total_layers, batch, f"{g}/{total_layers}:1:1:{batch // g}")
PY
)
sed "s/layers = [0-9]*/layers = $layers/; s/global_batch = [0-9]*/global_batch = $batch/" "$tiny" > "$work/standin.mist"
echo "tuned: $(grep -c '^ *- layers:' "$work/tuned.yaml") stages; stand-in: $layers layers, global batch $batch, plan $spec"
MISTC_FLAGS="--cluster $cluster --nodes $nodes" "$here/equivalence.sh" "$mistc" "$work/standin.mist" \
  "$work/eq" "$batch" "$reference" "$spec"
