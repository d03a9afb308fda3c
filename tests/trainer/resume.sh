#!/usr/bin/env bash
# Kill and resume: a run stopped after its step-3 checkpoint and resumed gives
# the same losses as the uninterrupted run (bitwise on CPU), and resumed under
# other plans (dp 2, tp 2, or two pipeline stages of dp 2 and tp 2, instead of
# one rank) the same within 1e-5; the pipeline's own kill and resume is bitwise.
# All of that in fp32; then in bf16: kill and resume is bitwise too, and a
# checkpoint crosses precisions both ways (fp32 -> bf16, bf16 -> fp32) with
# losses within 1e-3 of the run it left. The folder's two files are taken
# only as one save's pair (a save cut short between its renames resumes), and
# an older trainer's single latest.safetensors still resumes.
#   resume.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 source_model=$2 work=$3
mkdir -p "$work"
model=$work/model-f32.mist
sed 's/^train {$/train {\n  dtype = f32/' "$source_model" >"$model"
sed 's/^train {$/train {\n  dtype = bf16/' "$source_model" >"$work/model-bf16.mist"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build="$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-trainer.sh"
for shape in 1:1 2:1 1:2; do
  IFS=: read -r dp tp <<<"$shape"
  name=dp$dp-tp$tp
  cat >"$work/$name.yaml" <<PLAN
mist_plan: 1
global_batch: 16
grad_accum: 2
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: $((dp * tp))}
    micro_batch: $((8 / dp))
    dp: $dp
    tp: $tp
PLAN
  "$build" "$mistc" "$model" "$work/$name.yaml" "$work/$name"
done
# Two stages: layer 0 on dp 2, layer 1 on tp 2 (4 ranks).
cat >"$work/pp.yaml" <<PLAN
mist_plan: 1
global_batch: 16
grad_accum: 2
stages:
  - layers: [0, 0]
    mesh: {nodes: 1, gpus_per_node: 2}
    micro_batch: 4
    dp: 2
    tp: 1
  - layers: [1, 1]
    mesh: {nodes: 1, gpus_per_node: 2}
    micro_batch: 8
    dp: 1
    tp: 2
PLAN
"$build" "$mistc" "$model" "$work/pp.yaml" "$work/pp"
"$build" "$mistc" "$work/model-bf16.mist" "$work/dp1-tp1.yaml" "$work/bf16"
losses() { awk '/^step/ {print $2, $4}'; }
# run DP TP ARGS... (dp 0: the pipeline plan)
run() {
  local dp=$1 tp=$2; shift 2
  if [[ $dp == bf16 ]]; then
    timeout 300 mpirun --oversubscribe -np 1 "$work/bf16" --steps 6 --lr 3e-3 --log-every 1 "$@"
  elif [[ $dp == 0 ]]; then
    timeout 300 mpirun --oversubscribe -np 4 "$work/pp" --steps 6 --lr 3e-3 --log-every 1 "$@"
  else
    timeout 300 mpirun --oversubscribe -np "$((dp * tp))" "$work/dp$dp-tp$tp" --steps 6 --lr 3e-3 --log-every 1 "$@"
  fi
}

rm -rf "$work/full" "$work/cut" "$work/moved"
mkdir -p "$work/full" "$work/cut" "$work/moved"
run 1 1 --ckpt-dir "$work/full" | losses >"$work/full.txt"
run 1 1 --ckpt-dir "$work/cut" --ckpt-every 3 --abandon-after 4 | losses >"$work/cut-first.txt"
run 1 1 --ckpt-dir "$work/cut" --resume | losses >"$work/cut-second.txt"
echo "uninterrupted:"; cat "$work/full.txt"
echo "stopped after step 4, resumed from the step-3 checkpoint:"; cat "$work/cut-second.txt"
# Steps 4-6 of the resumed run equal the uninterrupted run's, digit for digit.
[[ $(head -1 "$work/cut-second.txt" | cut -d' ' -f1) == 4 ]] || { echo "resume did not start at step 4"; exit 1; }
diff <(tail -3 "$work/full.txt") "$work/cut-second.txt"

# The same checkpoint resumed on two data-parallel ranks, and on two
# tensor-parallel ranks (each takes its slice of the full tensors).
run 1 1 --ckpt-dir "$work/moved" --ckpt-every 3 --stop-after 3 >/dev/null
rm -rf "$work/step3" && cp -r "$work/moved" "$work/step3"
for shape in "2 1" "1 2" "0 0"; do
  rm -rf "$work/moved" && cp -r "$work/step3" "$work/moved"
  run $shape --ckpt-dir "$work/moved" --resume | losses >"$work/moved.txt"
  if [[ $shape == "0 0" ]]; then echo "resumed on two pipeline stages:"; else echo "resumed on dp x tp = ${shape/ / x }:"; fi
  cat "$work/moved.txt"
  paste <(tail -3 "$work/full.txt") "$work/moved.txt" | awk '
    { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) { print "step " $1 ": " $4 " vs " $2; bad = 1 } }
    END { exit bad }'
done
# A checkpoint written by two tp ranks (gathered) resumes on one rank. (A
# new run refuses a folder that holds a checkpoint: each starts in its own.)
rm -rf "$work/moved"
run 1 2 --ckpt-dir "$work/moved" --stop-after 6 >/dev/null
run 1 1 --ckpt-dir "$work/moved" --resume >/dev/null

# The pipeline stopped and resumed under its own plan: bitwise. Its
# checkpoint (every stage's tensors, sent to rank 0) resumes on one rank.
rm -rf "$work/ppfull" "$work/ppcut"
mkdir -p "$work/ppfull" "$work/ppcut"
run 0 0 --ckpt-dir "$work/ppfull" | losses >"$work/ppfull.txt"
run 0 0 --ckpt-dir "$work/ppcut" --ckpt-every 3 --abandon-after 4 >/dev/null
run 0 0 --ckpt-dir "$work/ppcut" --resume | losses >"$work/ppcut.txt"
echo "two stages, stopped after step 4 and resumed:"; cat "$work/ppcut.txt"
diff <(tail -3 "$work/ppfull.txt") "$work/ppcut.txt"
rm -rf "$work/ppcut"
run 0 0 --ckpt-dir "$work/ppcut" --ckpt-every 3 --stop-after 3 >/dev/null
run 1 1 --ckpt-dir "$work/ppcut" --resume | losses >"$work/pp-to-one.txt"
paste <(tail -3 "$work/full.txt") "$work/pp-to-one.txt" | awk '
  { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) { print "step " $1 ": " $4 " vs " $2; bad = 1 } }
  END { exit bad }'

# bf16: stopped and resumed, bitwise; a step-3 checkpoint of the fp32 run
# resumed in bf16 and one of the bf16 run resumed in fp32, each within 1e-3
# of the run it came from (the bound of the bf16 equivalence suites:
# docs/trainer-design.md, "Precision").
rm -rf "$work/bf16full" "$work/bf16cut" "$work/cross"
mkdir -p "$work/bf16full" "$work/bf16cut" "$work/cross"
run bf16 0 --ckpt-dir "$work/bf16full" | losses >"$work/bf16full.txt"
run bf16 0 --ckpt-dir "$work/bf16cut" --ckpt-every 3 --abandon-after 4 >/dev/null
run bf16 0 --ckpt-dir "$work/bf16cut" --resume | losses >"$work/bf16cut.txt"
echo "bf16, stopped after step 4 and resumed:"; cat "$work/bf16cut.txt"
diff <(tail -3 "$work/bf16full.txt") "$work/bf16cut.txt"
within() { # within REFERENCE.txt RUN.txt TOLERANCE: steps 4-6 of both
  paste <(tail -3 "$1") "$2" | awk -v tol="$3" '
    { d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > tol * $2) { print "step " $1 ": " $4 " vs " $2; bad = 1 } }
    END { exit bad }'
}
cp "$work/step3/"*.safetensors "$work/cross/"
run bf16 0 --ckpt-dir "$work/cross" --resume | losses >"$work/f32-to-bf16.txt"
echo "the fp32 run's step-3 checkpoint resumed in bf16:"; cat "$work/f32-to-bf16.txt"
within "$work/full.txt" "$work/f32-to-bf16.txt" 1e-3
rm -rf "$work/cross"
run bf16 0 --ckpt-dir "$work/cross" --ckpt-every 3 --stop-after 3 >/dev/null
run 1 1 --ckpt-dir "$work/cross" --resume | losses >"$work/bf16-to-f32.txt"
echo "the bf16 run's step-3 checkpoint resumed in fp32:"; cat "$work/bf16-to-f32.txt"
within "$work/bf16full.txt" "$work/bf16-to-f32.txt" 1e-3
python3 - "$work/cross" <<'PY'
import json, struct, sys
for name in ("model.safetensors", "optimizer.safetensors"):
    data = open(sys.argv[1] + "/" + name, "rb").read()
    header = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])
    meta = header.pop("__metadata__")
    assert meta["weights_dtype"] == "f32" and meta["grad_dtype"] == "f32", meta
    # The weights alone in the model file, the rest in the optimizer file.
    optimizer = [k for k in header if k.endswith((".master", ".adam_m", ".adam_v"))]
    assert (len(optimizer) == len(header)) == (name == "optimizer.safetensors"), (name, len(optimizer))
    assert name == "optimizer.safetensors" or not optimizer, optimizer
PY

# A save cut short between its two renames (the optimizer file of step 6
# in place, the model file still under its temporary name, step 3's model
# file where it was) resumes the step-6 pair; without that file, the
# mismatched pair is refused.
rm -rf "$work/torn" && mkdir -p "$work/torn"
cp "$work/step3/model.safetensors" "$work/torn/"
cp "$work/full/optimizer.safetensors" "$work/torn/"
cp "$work/full/model.safetensors" "$work/torn/model.safetensors.next"
run 1 1 --ckpt-dir "$work/torn" --resume >"$work/torn.txt" 2>&1
grep -q "the checkpoint is at step 6" "$work/torn.txt" || { cat "$work/torn.txt"; exit 1; }
rm "$work/torn/model.safetensors.next"
if run 1 1 --ckpt-dir "$work/torn" --resume >"$work/torn.txt" 2>&1; then
  echo "a model file of another save was accepted"; exit 1
fi
grep -q "optimizer.safetensors (step 6) has no model.safetensors of the same save beside it" \
  "$work/torn.txt" || { cat "$work/torn.txt"; exit 1; }
# An older trainer's single latest.safetensors (both files' tensors, format
# mistrt-checkpoint-1) still resumes, to the same losses as the pair.
rm -rf "$work/legacy" && mkdir -p "$work/legacy"
python3 - "$work/step3" "$work/legacy/latest.safetensors" <<'PY'
import json, struct, sys
tensors, meta = {}, {}
for name in ("model.safetensors", "optimizer.safetensors"):
    data = open(sys.argv[1] + "/" + name, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    meta.update({k: v for k, v in header.pop("__metadata__").items() if not k.startswith("hash:")})
    for k, v in header.items():
        b, e = v["data_offsets"]
        tensors[k] = (v["dtype"], v["shape"], data[8 + size + b:8 + size + e])
meta["format"] = "mistrt-checkpoint-1"
header, body = {"__metadata__": meta}, b""
for k in sorted(tensors):
    dtype, shape, raw = tensors[k]
    header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
    body += raw
raw = json.dumps(header).encode()
raw += b" " * (-len(raw) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(raw)) + raw + body)
PY
run 1 1 --ckpt-dir "$work/legacy" --resume | losses >"$work/legacy.txt"
echo "an older trainer's single-file checkpoint of step 3, resumed:"; cat "$work/legacy.txt"
within "$work/full.txt" "$work/legacy.txt" 1e-5
# Its next save is the pair; the single file is gone.
[[ -f $work/legacy/model.safetensors && -f $work/legacy/optimizer.safetensors && ! -e $work/legacy/latest.safetensors ]] \
  || { ls "$work/legacy"; echo "the resumed legacy folder was not rewritten as a pair"; exit 1; }

# Resuming a checkpoint of the last step trains nothing, and says so.
run 1 1 --ckpt-dir "$work/full" --resume >"$work/done.txt" 2>&1
grep -q "mistrt: warning: the checkpoint is at step 6 and --steps is 6: no step left to train" \
  "$work/done.txt" || { cat "$work/done.txt"; exit 1; }
# Tampered checkpoints are refused, naming what differs: a transposed tensor
# (the same element count once loaded silently), a step that is no number, a
# flipped bit (each tensor is checked against the hash recorded for it).
refusedAfter() { # refusedAfter PATTERN CHANGE...: resume a changed copy of the step-6 checkpoint
  local pattern=$1; shift
  rm -rf "$work/tamper" && cp -r "$work/full" "$work/tamper"
  python3 "$(dirname "$0")/tamper-checkpoint.py" "$work/tamper/model.safetensors" "$@" >/dev/null
  if run 1 1 --ckpt-dir "$work/tamper" --resume >"$work/tamper.txt" 2>&1; then
    echo "a checkpoint with '$*' was accepted"; exit 1
  fi
  grep -q "$pattern" "$work/tamper.txt" || { cat "$work/tamper.txt"; exit 1; }
}
refusedAfter "model.safetensors and optimizer.safetensors: tensor '.*' has shape \[[0-9]*, [0-9]*\], the model's is \[" transpose
refusedAfter "model.safetensors and optimizer.safetensors: step 'abc' in its metadata is not a whole number >= 0" step abc
refusedAfter "model.safetensors: tensor '.*' does not match the hash recorded when it was written" flip

# A checkpoint of another model is refused with a clear message.
printf 'not a checkpoint' >"$work/moved/optimizer.safetensors"
if run 1 1 --ckpt-dir "$work/moved" --resume >"$work/bad.txt" 2>&1; then
  echo "a corrupt checkpoint was accepted"; exit 1
fi
grep -q "mistrt: rank 0: .*optimizer.safetensors" "$work/bad.txt" || { cat "$work/bad.txt"; exit 1; }
echo "resume checks passed"
