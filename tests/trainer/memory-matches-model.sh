#!/usr/bin/env bash
# The memory model against the trainer: runs bench/memory/cpu-memory.sh (9
# single-rank fp32 plans: micro-batch, G, checkpointing, optimizer and
# activation offload) and fails when the peak the runtime allocated differs
# from mistc's prediction by more than TOLERANCE (a fraction, default 0.01).
# Allocation sizes on CPU ranks are deterministic, so this is exact work,
# not a timing.
#   memory-matches-model.sh MISTC BUILD WORK [TOLERANCE]
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: memory-matches-model.sh MISTC BUILD WORK [TOLERANCE]" >&2; exit 2; }
mistc=$1 build=$2 work=$3 tolerance=${4:-0.01}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
"$root/bench/memory/cpu-memory.sh" "$mistc" "$build" "$work/memory.json"
python3 - "$work/memory.json" "$tolerance" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
tolerance = float(sys.argv[2])
assert len(rows) == 9, f"expected 9 plans, got {len(rows)}"
bad = []
for r in rows:
    error = (r["measured_peak_mib"] - r["predicted_peak_mib"]) / r["measured_peak_mib"]
    if abs(error) > tolerance:
        bad.append(f'{r["plan"]}: predicted {r["predicted_peak_mib"]} MiB, '
                   f'measured {r["measured_peak_mib"]} MiB ({error:+.2%})')
if bad:
    print("the trainer's peak memory is off the model by more than "
          f"{tolerance:.0%}:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"all {len(rows)} plans within {tolerance:.0%} of the predicted peak")
PY
