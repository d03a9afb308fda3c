#!/usr/bin/env bash
# The trainer against an independent PyTorch model (pytorch-reference.py) on
# the same weights: the tiny GPT and Llama, one rank, 50 steps, in fp32 and in
# bf16. Each trainer writes its step-0 checkpoint (--steps 0), PyTorch loads
# it and trains as the trainer does; every step's loss must agree within
# 1e-5 relative in fp32, and in bf16 within 5e-4 (docs/trainer-design.md,
# "Precision": the two round at the same places but sum in other orders, and
# 50 steps carry each step's differences into the next) and within 3e-6 at
# step 1, where the fp32 trainer's loss must be at least 5 times farther off:
# the check tells the precisions apart. The GPT with the exact GELU too, in
# fp32, told apart from the tanh form the same way.
#   pytorch-reference.sh MISTC WORK [OUT.json]
# Needs a Python with torch and safetensors: $MIST_TORCH_PYTHON, else the
# exports venv ($MIST_EXPORTS_VENV or .venv-exports, bench/exports/setup-venv.sh);
# exits 77 (skipped) without one.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: pytorch-reference.sh MISTC WORK [OUT.json]" >&2; exit 2; }
mistc=$1 work=$2 out=${3:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${MIST_TORCH_PYTHON:-${MIST_EXPORTS_VENV:-$root/.venv-exports}/bin/python}
if ! "$python" -c "import torch, safetensors" 2>/dev/null; then
  echo "pytorch-reference.sh: no Python with torch and safetensors ($python): skipped"
  exit 77
fi
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=()
for family in gpt llama; do
  for dtype in f32 bf16; do
    name=$family-$dtype
    sed "s/^train {\$/train {\\n  dtype = $dtype/" "$root/examples/tiny-$family.mist" >"$work/$name.mist"
    "$root/scripts/build-trainer.sh" "$mistc" "$work/$name.mist" \
      "$root/tests/trainer/tiny-$family-1rank.yaml" "$work/$name" 2>/dev/null
    rm -rf "$work/$name.ckpt"
    mpirun -np 1 "$work/$name" --steps 0 --ckpt-dir "$work/$name.ckpt" >/dev/null
    mpirun -np 1 "$work/$name" --steps 50 --log-every 1 >"$work/$name.log"
    extra=()
    [[ $family == llama ]] && extra=(--kv-heads 2 --ffn 176)
    if [[ $dtype == f32 ]]; then
      bounds=(--tolerance 1e-5)
    else
      bounds=(--tolerance 5e-4 --first-step-tolerance 3e-6 --contrast-log "$work/$family-f32.log")
    fi
    "$python" "$root/tests/trainer/pytorch-reference.py" --family "$family" --dtype "$dtype" \
      --checkpoint "$work/$name.ckpt/optimizer.safetensors" --trainer-log "$work/$name.log" \
      "${bounds[@]}" --json "$work/$name.json" "${extra[@]}"
    results+=("$work/$name.json")
  done
done
# The exact GELU (gpt(..., approximate_gelu = false)) in fp32: PyTorch's
# gelu(approximate="none") must match it, and the tanh trainer's run must be
# at least 5 times farther off at its worst step (the check tells the forms
# apart). At lr 5e-3: the tiny model's initial MLP inputs (~0.2) are where
# the forms agree to 1e-6; training grows them until the losses part by
# ~5e-5 relative (tanh) where the exact trainer stays within ~1.4e-6.
name=gpt-exact-f32
sed -e "s/^train {\$/train {\\n  dtype = f32/" -e "s/heads = 4)/heads = 4, approximate_gelu = false)/" \
  "$root/examples/tiny-gpt.mist" >"$work/$name.mist"
grep -q "approximate_gelu = false" "$work/$name.mist" || { echo "pytorch-reference.sh: $name.mist not made" >&2; exit 1; }
"$root/scripts/build-trainer.sh" "$mistc" "$work/$name.mist" \
  "$root/tests/trainer/tiny-gpt-1rank.yaml" "$work/$name" 2>/dev/null
rm -rf "$work/$name.ckpt"
mpirun -np 1 "$work/$name" --steps 0 --ckpt-dir "$work/$name.ckpt" >/dev/null
mpirun -np 1 "$work/$name" --steps 50 --lr 5e-3 --log-every 1 >"$work/$name.log"
mpirun -np 1 "$work/gpt-f32" --steps 50 --lr 5e-3 --log-every 1 >"$work/gpt-tanh-lr5e-3.log"
"$python" "$root/tests/trainer/pytorch-reference.py" --family gpt --dtype f32 --gelu exact \
  --lr 5e-3 --checkpoint "$work/$name.ckpt/optimizer.safetensors" --trainer-log "$work/$name.log" \
  --tolerance 1e-5 --contrast-log "$work/gpt-tanh-lr5e-3.log" --contrast-over all \
  --json "$work/$name.json"
results+=("$work/$name.json")
if [[ -n $out ]]; then
  python3 -c "import json, sys; json.dump([json.load(open(f)) for f in sys.argv[2:]], open(sys.argv[1], 'w'), indent=1)" \
    "$out" "${results[@]}"
  echo "written $out"
fi
