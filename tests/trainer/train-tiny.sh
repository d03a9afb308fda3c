#!/usr/bin/env bash
# Emits train.cu for a one-rank plan of a tiny model, builds it with the
# line written in its header, trains for a few steps on synthetic data and
# checks that the loss falls and that --trace writes the measured timeline.
#   train-tiny.sh MISTC MODEL.mist PLAN.yaml WORKDIR
set -euo pipefail
mistc=$1 model=$2 plan=$3 work=$4
mkdir -p "$work"
"$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-trainer.sh" "$mistc" "$model" "$plan" "$work/train"
"$work/train" --steps 25 --lr 3e-3 --log-every 1 --trace "$work/trace.json" | tee "$work/log.txt"
# The measured timeline is Chrome trace JSON with every region's forward and backward.
python3 - "$work/trace.json" <<'PY'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
names = {e["name"].split()[0] for e in events}
assert {"pre", "layer", "post"} <= names, names
assert all(e["dur"] >= 0 for e in events)
print(f"trace: {len(events)} measured events")
PY
# Region by region against the report's prediction (here a GPU cluster's
# figures against CPU ranks: the plumbing, not the error, is checked).
"$mistc" "$model" --plan "$plan" --emit=report > "$work/report.txt" 2>/dev/null
python3 "$(cd "$(dirname "$0")/../.." && pwd)/bench/h100/compare-regions.py" "$work/report.txt" \
  "$work/trace.json" "$work/regions.json"
python3 - "$work/regions.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
found = {(r["region"], r["what"]) for r in rows}
need = {(g, w) for g in ("pre", "layer", "post") for w in ("forward", "backward", "AdamW")}
assert need <= found, sorted(need - found)
assert all(r["measured_ms"] >= 0 and r["predicted_ms"] >= 0 for r in rows), rows
PY
first=$(awk '/^step/ {print $4; exit}' "$work/log.txt")
last=$(awk '/^step/ {v = $4} END {print v}' "$work/log.txt")
echo "loss $first -> $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < a - 0.5) }'
# On CPU ranks there is no MFU: the plan's peak is a GPU's, not this CPU's.
grep -q "^mistrt: no MFU: the plan's peak ([0-9.]* TFLOP/s) is the .*'s, and this job runs on CPU ranks$" "$work/log.txt"
! grep -q "^step.*MFU" "$work/log.txt"
