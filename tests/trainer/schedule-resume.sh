#!/usr/bin/env bash
# The learning-rate schedule is part of the run (issue 24): a run of 4 steps
# resumed with --steps 8 continues the 4-step schedule (its lr stays at the
# floor, 0.1 lr) and says so; with --reschedule it takes the 8-step schedule
# and says that; --steps 0 --ckpt-dir writes the initial weights, from which
# a resumed run trains exactly as a fresh one.
#   schedule-resume.sh MISTC MODEL.mist PLAN.yaml WORKDIR
set -euo pipefail
mistc=$1 model=$2 plan=$3 work=$4
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-trainer.sh" "$mistc" "$model" "$plan" "$work/train"
run() { mpirun -np 1 --oversubscribe "$work/train" --log-every 1 --seed 5 "$@"; }
lrOf() { sed -n "s/^step *$1 .* lr \([^ ]*\) .*/\1/p" "$2"; }
lossOf() { sed -n "s/^step *$1 *loss \([^ ]*\) .*/\1/p" "$2"; }
fail() { echo "schedule-resume.sh: $*" >&2; exit 1; }

rm -rf "$work/a" "$work/b" "$work/zero"
run --steps 4 --ckpt-dir "$work/a" > "$work/first.log"
cp -r "$work/a" "$work/b"
run --steps 8 --ckpt-dir "$work/a" --resume > "$work/continued.log"
grep -q "continuing the checkpoint's schedule (lr 0.001, warmup 0, 4 steps), not this run's (lr 0.001, warmup 0, 8 steps); --reschedule uses this run's" "$work/continued.log" ||
  fail "the resumed run did not say it continues the checkpoint's schedule"
[[ $(lrOf 5 "$work/continued.log") == 0.0001 && $(lrOf 8 "$work/continued.log") == 0.0001 ]] ||
  fail "after the 4-step schedule's end the lr must stay at its floor 0.0001, not $(lrOf 5 "$work/continued.log")"

run --steps 8 --ckpt-dir "$work/b" --resume --reschedule > "$work/rescheduled.log"
grep -q "reschedule: this run's schedule (lr 0.001, warmup 0, 8 steps) replaces the checkpoint's (lr 0.001, warmup 0, 4 steps)" "$work/rescheduled.log" ||
  fail "--reschedule did not say it replaces the schedule"
run --steps 8 > "$work/straight.log"
[[ $(lrOf 5 "$work/rescheduled.log") == "$(lrOf 5 "$work/straight.log")" ]] ||
  fail "--reschedule's step 5 lr $(lrOf 5 "$work/rescheduled.log") is not the 8-step schedule's $(lrOf 5 "$work/straight.log")"

run --steps 0 --ckpt-dir "$work/zero" > "$work/zero.log"
grep -q "checkpoint of step 0 written" "$work/zero.log" || fail "--steps 0 wrote no checkpoint"
run --steps 8 --ckpt-dir "$work/zero" --resume > "$work/from-zero.log"
for s in 1 8; do
  [[ $(lossOf $s "$work/from-zero.log") == "$(lossOf $s "$work/straight.log")" ]] ||
    fail "from the step-0 checkpoint, step $s loss $(lossOf $s "$work/from-zero.log") differs from a fresh run's $(lossOf $s "$work/straight.log")"
done
# Another schedule from the command line (wsd: stable, then the last half of
# the steps decay linearly to --min-lr): recorded, and continued by a resumed
# run that does not repeat the flags.
rm -rf "$work/wsd"
run --steps 8 --lr-decay wsd --decay-fraction 0.5 --min-lr 1e-5 --ckpt-dir "$work/wsd" \
  --ckpt-every 4 --stop-after 4 >"$work/wsd-first.log"
for s in 1 4; do
  [[ $(lrOf $s "$work/wsd-first.log") == 0.001 ]] || fail "wsd: step $s lr $(lrOf $s "$work/wsd-first.log") is not the stable 0.001"
done
run --steps 8 --ckpt-dir "$work/wsd" --resume >"$work/wsd-resumed.log"
grep -q "continuing the checkpoint's schedule (lr 0.001, warmup 0, 8 steps, wsd (decaying over the last 0.5) to 1e-05)" \
  "$work/wsd-resumed.log" || fail "the resumed run did not say it continues the wsd schedule"
[[ $(lrOf 6 "$work/wsd-resumed.log") == 0.000505 && $(lrOf 8 "$work/wsd-resumed.log") == 1e-05 ]] ||
  fail "wsd after resume: step 6 lr $(lrOf 6 "$work/wsd-resumed.log") (not 0.000505), step 8 $(lrOf 8 "$work/wsd-resumed.log") (not 1e-05)"
# The checkpoint records the plan and where the data stood; a resumed run
# that reads other data says its batches differ from the run it continues.
python3 - "$work/wsd/model.safetensors" <<'PY' || fail "the checkpoint does not record the plan and data position"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
assert meta["plan"].startswith("1 stage: dp 1"), meta["plan"]
assert (meta["data"], meta["data_order"], meta["next_sequence"]) == ("synthetic", "file order", "128"), meta
PY
# The folder's two files: model.safetensors the weights alone in the run's
# dtype (bf16 here: each the bf16 rounding of its fp32 master),
# optimizer.safetensors the masters and Adam moments; one save, one step.
python3 - "$work/wsd" <<'PY' || fail "model.safetensors and optimizer.safetensors do not split the checkpoint"
import json, struct, sys
def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]
opt, opt_data = read(sys.argv[1] + "/optimizer.safetensors")
model, model_data = read(sys.argv[1] + "/model.safetensors")
om, mm = opt.pop("__metadata__"), model.pop("__metadata__")
assert (om["format"], mm["format"]) == ("mistrt-optimizer-1", "mistrt-model-1"), (om["format"], mm["format"])
assert om["step"] == mm["step"] and om["save"] == mm["save"], (om, mm)
weights = sorted(model)
assert weights == sorted(k[: -len(".master")] for k in opt if k.endswith(".master")), "other tensors than the weights"
assert all(k.endswith((".master", ".adam_m", ".adam_v")) for k in opt), "weights in the optimizer file"
def bf16(bits):  # round to nearest even, as the trainer does
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
for k in weights:
    assert model[k]["dtype"] == "BF16", model[k]
    a, b = opt[k + ".master"]["data_offsets"], model[k]["data_offsets"]
    masters = struct.unpack(f"<{(a[1] - a[0]) // 4}I", opt_data[a[0]:a[1]])
    halves = struct.unpack(f"<{(b[1] - b[0]) // 2}H", model_data[b[0]:b[1]])
    assert tuple(bf16(m) for m in masters) == halves, k
print(f"model.safetensors: {len(weights)} weights in BF16, each its master rounded")
PY
python3 - "$work/tokens.bin" <<'PY'
import struct, sys
tokens = [(7 * i) % 256 for i in range(40000)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
PY
run --steps 9 --ckpt-dir "$work/wsd" --resume --data "$work/tokens.bin" >"$work/other-data.log" 2>&1
grep -q "warning: the checkpoint's run read synthetic data, this run reads $work/tokens.bin (40000 tokens, FNV-1a [0-9a-f]*; file order): from step 9 on" \
  "$work/other-data.log" || fail "no warning that the resumed run reads other data"
echo "schedule-resume.sh: schedules (the default and wsd) survive resume; --reschedule and the step-0 checkpoint work"
