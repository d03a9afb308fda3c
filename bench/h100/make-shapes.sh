#!/usr/bin/env bash
# The shapes file the H100 profiler run measures (bench/h100/profile-h100.sh): every
# (op, shape) the performance model looks up for GPT-3 1.3B and 2.7B (examples/gpt3-*.mist,
# seq 2048) on one GPU (tp = 1) at micro-batch 1 to 8, from `mistc --emit=profile-shapes`
# with one single-GPU plan per micro-batch, merged (one line per op and shape, sorted).
#
# Runs where mistc builds (not on the H100 host, which has no LLVM/GiNaC/GLPK): from the
# repository root, after building mistc into build/ (or MISTC=path):
#   bash bench/h100/make-shapes.sh            # writes bench/h100/gpt3-shapes.tsv
# Environment: MISTC (build/bin/mistc), OUT (bench/h100/gpt3-shapes.tsv),
# MODELS ("gpt3-1.3b gpt3-2.7b"), MICRO_BATCHES ("1 2 3 4 5 6 7 8").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
MISTC="${MISTC:-$root/build/bin/mistc}"
OUT="${OUT:-$here/gpt3-shapes.tsv}"
MODELS="${MODELS:-gpt3-1.3b gpt3-2.7b}"
MICRO_BATCHES="${MICRO_BATCHES:-1 2 3 4 5 6 7 8}"
# Any global batch that every micro-batch divides: the shapes do not depend on it.
GLOBAL_BATCH=840

if [ ! -x "$MISTC" ]; then
  echo "make-shapes.sh: no mistc at $MISTC (build it, or set MISTC)" >&2
  exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for model in $MODELS; do
  src="$root/examples/$model.mist"
  # The layer count, for the plan's one stage.
  layers="$(grep -o 'layers = [0-9]*' "$src" | head -1 | grep -o '[0-9]*')"
  for b in $MICRO_BATCHES; do
    plan="$tmp/$model-b$b.yaml"
    "$root/scripts/single-gpu-plan.sh" "$layers" $((GLOBAL_BATCH / b)) "$b" >"$plan"
    "$MISTC" "$src" --cluster h100-80g --global-batch "$GLOBAL_BATCH" --plan "$plan" \
      --emit=profile-shapes -o "$tmp/$model-b$b.tsv"
  done
done

{
  echo "# mist-profile-shapes 1"
  echo "# models: $MODELS (examples/*.mist, seq 2048) on one GPU (tp = 1), micro-batch $MICRO_BATCHES"
  echo "# made by bench/h100/make-shapes.sh from mistc --emit=profile-shapes --cluster h100-80g"
  echo "# op	shape	attributes"
  # One line per (op, shape), the first seen; byte order (= the order mistc writes).
  cat "$tmp"/*.tsv | awk -F '\t' '!/^#/ && !seen[$1 FS $2]++' | LC_ALL=C sort
} >"$OUT"
echo "make-shapes.sh: wrote $OUT ($(grep -vc '^#' "$OUT") ops and shapes)"
