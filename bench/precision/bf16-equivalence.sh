#!/usr/bin/env bash
# Every plan of the equivalence suites (tests/trainer/equivalence-plans.txt:
# plans of the tiny GPT and Llama on 1-8 CPU ranks, interleaved ones too) trained in bf16
# (tests/trainer/Inputs/*-bf16.mist) against the one-rank bf16 run of its
# suite: prints each plan's worst relative loss difference over 3 steps and
# its final checkpoint's distance (parameters relative to their norm, the
# worst tensor relative to its own), and checks them against the bounds the
# ctest bf16 suites use (docs/trainer-design.md, "Precision").
#   bf16-equivalence.sh MISTC WORK [OUT.json]
# Writes OUT.json (default bench/results/bf16-equivalence.json) and a text
# copy of the table beside it.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: bf16-equivalence.sh MISTC WORK [OUT.json]" >&2; exit 2; }
mistc=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/bf16-equivalence.json}
mkdir -p "$work"
export TRAINER_OPT=-O0 LOSS_TOLERANCE=2e-4 CKPT_MODEL_TOL=5e-3 CKPT_TENSOR_TOL=0.3
status=0
while read -r name model batch plans; do
  [[ -z $name || $name == \#* ]] && continue
  # shellcheck disable=SC2086 # the plans are words
  "$root/tests/trainer/equivalence.sh" "$mistc" "$root/tests/trainer/Inputs/$model-bf16.mist" \
    "$work/$name" "$batch" $plans </dev/null >"$work/$name.log" 2>&1 || status=1
done <"$root/tests/trainer/equivalence-plans.txt"
python3 - "$work" "$out" "$status" <<'PY'
import json, re, sys
work, out, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = []
for suite in ("gpt", "llama", "reslice", "interleaved"):
    reference = None
    plan = None
    for line in open(f"{work}/{suite}.log"):
        m = re.match(r"(\S+) \((\d+) ranks?\): (.*)", line)
        if m:
            losses = [float(x) for x in m.group(3).split()]
            plan = {"suite": suite, "plan": m.group(1), "ranks": int(m.group(2)), "losses": losses}
            if reference is None:
                reference = losses
                plan.update(loss_rel=0.0, params_rel=0.0, worst_tensor_rel=0.0, worst_tensor="")
                rows.append(plan)
            else:
                plan["loss_rel"] = max(abs(a - b) / a for a, b in zip(reference, losses))
            continue
        m = re.search(r"differ by (\S+) of their norm, the worst tensor by (\S+) \((.*)\)", line)
        if m and plan is not None and "params_rel" not in plan:
            plan.update(params_rel=float(m.group(1)), worst_tensor_rel=float(m.group(2)),
                        worst_tensor=m.group(3))
            rows.append(plan)
lines = [f"{'suite':8} {'plan':58} {'ranks':>5} {'loss':>9} {'params':>9} {'tensor':>7}  worst tensor"]
for r in rows:
    lines.append(f"{r['suite']:8} {r['plan']:58} {r['ranks']:5} {r['loss_rel']:9.2e} "
                 f"{r['params_rel']:9.2e} {r['worst_tensor_rel']:7.3f}  {r['worst_tensor']}")
worst = {k: max(r[k] for r in rows) for k in ("loss_rel", "params_rel", "worst_tensor_rel")}
lines.append(f"{len(rows)} plans; worst: loss {worst['loss_rel']:.2e} (bound 2e-4), parameters "
             f"{worst['params_rel']:.2e} (bound 5e-3), a tensor {worst['worst_tensor_rel']:.3f} "
             f"(bound 0.3); {'all within the bounds' if status == 0 else 'SOME OUTSIDE THE BOUNDS'}")
print("\n".join(lines))
json.dump({"bounds": {"loss_rel": 2e-4, "params_rel": 5e-3, "worst_tensor_rel": 0.3},
           "worst": worst, "plans": rows}, open(out, "w"), indent=1)
open(out.rsplit(".", 1)[0] + ".txt", "w").write("\n".join(lines) + "\n")
PY
echo "written $out"
exit "$status"
