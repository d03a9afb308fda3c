#!/usr/bin/env bash
# Megatron-LM indexed datasets in the trainer (issue 48, item 1): the tiny
# GPT on two dp ranks trains from a weighted blend of two datasets written
# by scripts/make-tokens.py --format megatron, logs what it reads, resumes
# without a warning on the same data and with one on another split, and
# refuses a token outside the model's vocabulary (naming the file), a blend
# too small for the run, --data with --data-path, and an llm.c file made for
# a larger vocabulary. The order itself is Megatron-LM's
# (tests/data/megatron-data-check.py checks it against Megatron-Core).
#   megatron-data.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 model=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "megatron-data.sh: $*" >&2; exit 1; }
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-2ranks.yaml" "$work/train"
python3 "$root/scripts/make-tokens.py" --format megatron --out "$work/docs" "$root/docs" >/dev/null
python3 "$root/scripts/make-tokens.py" --format megatron --out "$work/licenses" \
  /usr/share/common-licenses >/dev/null
run() { timeout 300 mpirun --oversubscribe -np 2 "$work/train" --log-every 1 "$@" </dev/null; }
blend=(--data-path 0.7 "$work/docs" 0.3 "$work/licenses" --split 90,8,2)

# Trains from the blend and says what it reads.
rm -rf "$work/ck"
run --steps 4 "${blend[@]}" --ckpt-dir "$work/ck" --stop-after 2 >"$work/first.log" 2>&1 ||
  { cat "$work/first.log"; fail "the trainer failed on the blend"; }
grep -q "^mistrt: data: Megatron-LM data: 0.7 x $work/docs (.* sequences of uint16, train \[0, " \
  "$work/first.log" || { cat "$work/first.log"; fail "no line naming the blend"; }
grep -q "split 90,8,2, seed 1234, .* samples of 65 tokens" "$work/first.log" ||
  { cat "$work/first.log"; fail "no split, seed and samples in the data line"; }
[ "$(grep -c '^step ' "$work/first.log")" = 2 ] || { cat "$work/first.log"; fail "not 2 steps"; }

# The resume reads the same data: no warning. Another split: a warning.
run --steps 4 "${blend[@]}" --ckpt-dir "$work/ck" --resume >"$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "the resume failed"; }
! grep -q "trains on other batches" "$work/resume.log" ||
  { cat "$work/resume.log"; fail "the same data was taken for other data"; }
grep -q "^step *4 " "$work/resume.log" || { cat "$work/resume.log"; fail "no step 4"; }
run --steps 6 --data-path 0.7 "$work/docs" 0.3 "$work/licenses" --split 80,10,10 \
  --ckpt-dir "$work/ck" --resume >"$work/other.log" 2>&1 ||
  { cat "$work/other.log"; fail "the resume on another split failed"; }
grep -q "trains on other batches" "$work/other.log" ||
  { cat "$work/other.log"; fail "no warning for another split"; }

# A token past the vocabulary (256) is refused, naming the file.
python3 - "$work/wide" <<'PY'
import struct, sys
prefix = sys.argv[1]
tokens = list(range(100, 300)) * 3  # 256 and above are outside tiny_gpt's vocabulary
with open(prefix + ".bin", "wb") as f:
    f.write(struct.pack(f"<{len(tokens)}i", *tokens))
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 4, 1, 2))
    f.write(struct.pack("<i", len(tokens)) + struct.pack("<q", 0) + struct.pack("<2q", 0, 1))
PY
if run --steps 2 --data-path "$work/wide" >"$work/wide.log" 2>&1; then
  fail "a token outside the vocabulary was accepted"
fi
grep -q "$work/wide.bin: token .* is [0-9]*, outside the model's vocabulary \[0, 256)" \
  "$work/wide.log" || { cat "$work/wide.log"; fail "no message naming the file and the token"; }

# A blend of one epoch each (no weights) too small for the run.
if run --steps 100000 --data-path "$work/docs" "$work/licenses" >"$work/small.log" 2>&1; then
  fail "a run longer than its data was accepted"
fi
grep -q "need more than the .* samples built" "$work/small.log" ||
  { cat "$work/small.log"; fail "no message for too little data"; }

# --data and --data-path together; an llm.c file made for a larger vocabulary.
if "$work/train" --data x.bin --data-path y >"$work/both.log" 2>&1; then fail "both accepted"; fi
grep -q "give one" "$work/both.log" || { cat "$work/both.log"; fail "no message for both"; }
python3 - "$work/big-vocab.bin" <<'PY'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 100, 50257, *([0] * 252)))
    f.write(struct.pack("<100H", *range(100)))
PY
if run --steps 1 --data "$work/big-vocab.bin" >"$work/big-vocab.log" 2>&1; then
  fail "a file made for a vocabulary of 50257 was accepted"
fi
grep -q "was tokenized for a vocabulary of 50257 tokens" "$work/big-vocab.log" ||
  { cat "$work/big-vocab.log"; fail "no message for the file's vocabulary"; }
echo "megatron-data.sh: the blend trains, resumes, and every refusal says why"
