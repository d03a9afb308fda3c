#!/usr/bin/env bash
# --init-from DIR starts a new run from a checkpoint's weights with fresh
# optimizer state: from the step-0 checkpoint of a run (its initial values)
# the 5 steps repeat that run's losses exactly, on its own plan and (within
# 1e-5) on two dp ranks, and (bf16 rounding, within 1e-4) on a two-stage
# plan of 8 ranks (tp, ZeRO-1, checkpointing, offload); from a bf16 run's step-3 checkpoint the weights are
# its masters (its log names the optimizer file); --init-from with --resume,
# a folder without a model file and a checkpoint of another model are refused.
#   init-from.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 model=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "init-from.sh: $*" >&2; exit 1; }
losses() { grep -E '^step ' "$1" | awk '{print $1, $2, $3, $4}'; }
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-1rank.yaml" "$work/train1"
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-2ranks.yaml" "$work/train2"
run1() { timeout 300 mpirun -np 1 "$work/train1" --log-every 1 "$@" </dev/null; }
rm -rf "$work/step0" "$work/step3"
run1 --steps 0 --ckpt-dir "$work/step0" >/dev/null
run1 --steps 5 >"$work/fresh.log"
run1 --steps 5 --init-from "$work/step0" >"$work/init.log"
grep -q "^mistrt: initial weights from $work/step0/model.safetensors and optimizer.safetensors's masters (step 0 of its run)" \
  "$work/init.log" || { cat "$work/init.log"; fail "no initial-weights line"; }
diff <(losses "$work/fresh.log") <(losses "$work/init.log") ||
  fail "--init-from the step-0 checkpoint did not repeat the run's losses"
timeout 300 mpirun --oversubscribe -np 2 "$work/train2" --log-every 1 --steps 5 \
  --init-from "$work/step0" >"$work/init2.log" </dev/null
python3 - "$work/fresh.log" "$work/init2.log" <<'PY'
import sys
def losses(path):
    return [float(l.split()[3]) for l in open(path) if l.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 5, (a, b)
worst = max(abs(x - y) / x for x, y in zip(a, b))
assert worst <= 1e-5, f"two dp ranks from the same weights differ by {worst:.1e}"
print(f"two dp ranks from the step-0 checkpoint: losses within {worst:.1e}")
PY
# Eight ranks: two stages of different dp and tp, ZeRO-1, a checkpointed layer
# and offloaded activations (the tutorial's two-stage plan).
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/lit/driver/Inputs/two-stage-plan.yaml" \
  "$work/train8"
timeout 300 mpirun --oversubscribe -np 8 "$work/train8" --log-every 1 --steps 5 \
  --init-from "$work/step0" >"$work/init8.log" </dev/null
python3 - "$work/fresh.log" "$work/init8.log" <<'PY'
import sys
def losses(path):
    return [float(l.split()[3]) for l in open(path) if l.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 5, (a, b)
worst = max(abs(x - y) / x for x, y in zip(a, b))
# bf16 (the tiny GPT's dtype): tp sums round in another order, as the
# equivalence suites' bf16 bound allows.
assert worst <= 1e-4, f"the two-stage plan from the same weights differs by {worst:.1e}"
print(f"two stages on 8 ranks from the step-0 checkpoint: losses within {worst:.1e}")
PY
run1 --steps 3 --ckpt-dir "$work/step3" >/dev/null
run1 --steps 2 --init-from "$work/step3" >"$work/later.log"
grep -q "optimizer.safetensors's masters (step 3 of its run)" "$work/later.log" ||
  { cat "$work/later.log"; fail "the step-3 masters were not taken"; }
# Refusals.
if run1 --steps 1 --init-from "$work/step0" --resume --ckpt-dir "$work/step3" >"$work/both.log" 2>&1; then
  fail "--init-from with --resume was accepted"
fi
grep -q "give one of them" "$work/both.log" || { cat "$work/both.log"; fail "no message for both"; }
mkdir -p "$work/empty"
if run1 --steps 1 --init-from "$work/empty" >"$work/empty.log" 2>&1; then fail "an empty folder was accepted"; fi
grep -q "no model.safetensors in $work/empty" "$work/empty.log" || { cat "$work/empty.log"; fail "no message for the empty folder"; }
sed 's/model tiny_gpt = gpt(vocab = 256, hidden = 64/model tiny_gpt = gpt(vocab = 256, hidden = 32/' "$model" >"$work/narrow.mist"
"$root/scripts/build-trainer.sh" "$mistc" "$work/narrow.mist" "$root/tests/trainer/tiny-gpt-1rank.yaml" "$work/narrow"
if timeout 300 mpirun -np 1 "$work/narrow" --steps 1 --init-from "$work/step0" >"$work/narrow.log" 2>&1; then
  fail "the weights of a wider model were accepted"
fi
grep -q "has shape \[256, 64\], the model's is \[256, 32\]" "$work/narrow.log" ||
  { cat "$work/narrow.log"; fail "no message for the other shape"; }
echo "init-from.sh: --init-from repeats the run from its initial weights and refuses what it must"
