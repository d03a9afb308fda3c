#!/usr/bin/env bash
# A checkpoint of another shape of a model with the same name, or a damaged
# one, is refused by name, by the trainer's resume and by --emit=hf alike
# (issue 46 item 4): the tiny GPT trains a step, then
#   - its 1-layer twin (same name) resumes: "a checkpoint of 2 layers";
#   - --emit=hf of the twin: the checkpoint holds layer 1, which it lacks;
#   - --emit=hf of a hidden-32 twin: a tensor of another shape;
#   - --emit=hf of a copy with one byte flipped: the recorded hash differs.
#   checkpoint-of-another-model.sh MISTC MODEL.mist WORK
set -euo pipefail
mistc=$1 model=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
plan=$here/tiny-gpt-1rank.yaml
sed 's/layers = 2/layers = 1/' "$model" > "$work/one-layer.mist"
sed 's/hidden = 64/hidden = 32/' "$model" > "$work/hidden-32.mist"
sed 's/layers: \[0, 1\]/layers: [0, 0]/' "$plan" > "$work/one-layer.yaml"
TRAINER_OPT=-O0 "$here/../../scripts/build-trainer.sh" "$mistc" "$model" "$plan" "$work/train"
TRAINER_OPT=-O0 "$here/../../scripts/build-trainer.sh" "$mistc" "$work/one-layer.mist" \
  "$work/one-layer.yaml" "$work/one-layer"
rm -rf "$work/ckpt"
mpirun -np 1 "$work/train" --steps 1 --ckpt-dir "$work/ckpt" > /dev/null </dev/null
# expect NAME PATTERN COMMAND...: the command fails and prints PATTERN.
expect() {
  local name=$1 pattern=$2; shift 2
  if "$@" > "$work/$name.txt" 2>&1 </dev/null; then
    echo "$name: succeeded"; cat "$work/$name.txt"; exit 1
  fi
  grep -qE "$pattern" "$work/$name.txt" || { echo "$name: no '$pattern' in:"; cat "$work/$name.txt"; exit 1; }
  echo "$name: $(grep -E "$pattern" "$work/$name.txt" | head -1)"
}
expect resume-fewer-layers "a checkpoint of 2 layers of 'tiny_gpt'; this model has 1" \
  mpirun -np 1 "$work/one-layer" --steps 2 --ckpt-dir "$work/ckpt" --resume
expect hf-fewer-layers "holds 'layers\.1\..*', which model 'tiny_gpt' \(1 layers\) does not have" \
  "$mistc" "$work/one-layer.mist" --emit=hf --checkpoint "$work/ckpt" -o "$work/hf-one"
expect hf-hidden "has shape \[64\]; model 'tiny_gpt' has \[32\]" \
  "$mistc" "$work/hidden-32.mist" --emit=hf --checkpoint "$work/ckpt" -o "$work/hf-32"
rm -rf "$work/flipped" && cp -r "$work/ckpt" "$work/flipped"
python3 - "$work/flipped/model.safetensors" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
header = struct.unpack("<Q", data[:8])[0]
data[8 + header + 100] ^= 0xFF
open(sys.argv[1], "wb").write(data)
PY
expect hf-flipped "does not match the hash recorded when it was written" \
  "$mistc" "$model" --emit=hf --checkpoint "$work/flipped" -o "$work/hf-flipped"
[[ ! -e $work/hf-one && ! -e $work/hf-32 && ! -e $work/hf-flipped ]] ||
  { echo "a refused export left a folder behind"; exit 1; }
echo "all four refused"
