#!/usr/bin/env bash
# The same tokens written in each token-file header the trainer reads (llm.c's
# GPT-2 uint16 files, its LLaMA-3 uint32 files, and the older uint32 variant
# of the GPT-2 header) train to the same losses, and the log names the format.
#   data-formats.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 model=$2 work=$3
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-1rank.yaml" \
  "$work/train"
python3 - "$work" <<'PY'
import random, struct, sys
work = sys.argv[1]
rng = random.Random(7)
tokens = [rng.randrange(256) for _ in range(4096)]
for name, magic, version, code in (("gpt2", 20240520, 1, "H"), ("llama3", 20240801, 7, "I"),
                                   ("uint32", 20240520, 2, "I")):
    with open(f"{work}/{name}.bin", "wb") as f:
        f.write(struct.pack("<256i", magic, version, len(tokens), *([0] * 253)))
        f.write(struct.pack(f"<{len(tokens)}{code}", *tokens))
PY
declare -A expected_format=([gpt2]="llm.c GPT-2, uint16 tokens" \
  [llama3]="llm.c LLaMA-3, uint32 tokens" [uint32]="uint32 tokens")
for name in gpt2 llama3 uint32; do
  mpirun -np 1 "$work/train" --steps 3 --data "$work/$name.bin" >"$work/$name.log" 2>&1 ||
    { echo "$name: the trainer failed:"; cat "$work/$name.log"; exit 1; }
  line="mistrt: data $work/$name.bin (${expected_format[$name]}, 4096 tokens), read in file order"
  grep -qF "$line" "$work/$name.log" || { echo "$name: no '$line' in:"; cat "$work/$name.log"; exit 1; }
  grep -E '^step ' "$work/$name.log" | awk '{print $1, $2, $3, $4}' >"$work/$name.losses"
  [ "$(wc -l <"$work/$name.losses")" = 3 ] || { echo "$name: not 3 steps:"; cat "$work/$name.log"; exit 1; }
done
for name in llama3 uint32; do
  diff -u "$work/gpt2.losses" "$work/$name.losses" ||
    { echo "$name: the losses differ from the GPT-2 file's"; exit 1; }
done
echo "the 3 formats train to the same losses:"; cat "$work/gpt2.losses"
