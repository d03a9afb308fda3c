#!/usr/bin/env bash
# `mistc --emit=hf` against Hugging Face transformers: the tiny GPT, Llama and
# GPT-NeoX, and the GPT with the exact GELU (fp32, one rank) train 19 steps
# at lr 1e-2 and save; mistc converts the checkpoint to a transformers folder;
# transformers loads it (GPT2LMHeadModel, LlamaForCausalLM,
# GPTNeoXForCausalLM) and its loss on step 20's batch must equal the loss the
# trainer logged at step 20 within 1e-5 relative (hf-export-check.py), its
# config naming the activation the model uses. Trained this far the weights
# matter: NeoX's folder with a wrong rotary fraction (0.5 for 0.25) was 3.3e-4
# off, where after 3 steps at lr 1e-3 it was within 7e-6. The bf16 GPT's
# folder must load too, in bfloat16.
#   hf-export.sh MISTC WORK
# Needs a Python with torch and transformers: $MIST_TORCH_PYTHON, else the
# exports venv ($MIST_EXPORTS_VENV or .venv-exports, bench/exports/setup-venv.sh);
# exits 77 (skipped) without one.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: hf-export.sh MISTC WORK" >&2; exit 2; }
mistc=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${MIST_TORCH_PYTHON:-${MIST_EXPORTS_VENV:-$root/.venv-exports}/bin/python}
if ! "$python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  echo "hf-export.sh: no Python with torch, transformers and safetensors ($python): skipped"
  exit 77
fi
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# gpt-exact: the GPT with the exact GELU, exported as GPT-2 with "gelu"
# (x Phi(x)) where the tanh form is "gelu_new"; GPT-NeoX's GELU is exact.
for variant in gpt llama gpt-exact neox; do
  family=${variant%-exact}
  name=$variant-f32
  sed -e "s/^train {\$/train {\\n  dtype = f32/" "$root/examples/tiny-$family.mist" >"$work/$name.mist"
  activation=gelu_new
  [[ $family == llama ]] && activation=silu
  [[ $family == neox ]] && activation=gelu
  if [[ $variant == gpt-exact ]]; then
    sed -i "s/heads = 4)/heads = 4, approximate_gelu = false)/" "$work/$name.mist"
    grep -q "approximate_gelu = false" "$work/$name.mist" || { echo "hf-export.sh: $name.mist not made" >&2; exit 1; }
    activation=gelu
  fi
  "$root/scripts/build-trainer.sh" "$mistc" "$work/$name.mist" \
    "$root/tests/trainer/tiny-$family-1rank.yaml" "$work/$name" 2>/dev/null
  rm -rf "$work/$name.ckpt" "$work/$name.hf"
  mpirun -np 1 "$work/$name" --steps 20 --lr 1e-2 --ckpt-every 19 --stop-after 19 \
    --ckpt-dir "$work/$name.ckpt" >/dev/null
  mpirun -np 1 "$work/$name" --steps 20 --lr 1e-2 --log-every 1 >"$work/$name.log"
  "$mistc" "$work/$name.mist" --emit=hf --checkpoint "$work/$name.ckpt" -o "$work/$name.hf"
  class=GPT2LMHeadModel
  [[ $family == llama ]] && class=LlamaForCausalLM
  [[ $family == neox ]] && class=GPTNeoXForCausalLM
  "$python" "$root/tests/trainer/hf-export-check.py" --dir "$work/$name.hf" \
    --trainer-log "$work/$name.log" --step 20 --expect-class $class --expect-activation $activation
done
# bf16, from the checkpoint folder's model.safetensors (the weights alone, BF16):
# transformers loads the folder as bfloat16, the weights exactly the checkpoint's.
"$root/scripts/build-trainer.sh" "$mistc" "$root/examples/tiny-gpt.mist" \
  "$root/tests/trainer/tiny-gpt-1rank.yaml" "$work/gpt-bf16" 2>/dev/null
rm -rf "$work/gpt-bf16.ckpt" "$work/gpt-bf16.hf"
mpirun -np 1 "$work/gpt-bf16" --steps 1 --ckpt-dir "$work/gpt-bf16.ckpt" >/dev/null
# From the weights-only model file beside the checkpoint (BF16 tensors).
"$mistc" "$root/examples/tiny-gpt.mist" --emit=hf --checkpoint "$work/gpt-bf16.ckpt/model.safetensors" \
  -o "$work/gpt-bf16.hf"
"$python" - "$work/gpt-bf16.hf" "$work/gpt-bf16.ckpt/model.safetensors" <<'PY'
import sys, torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype="auto")
ours = load_file(sys.argv[2])
wte = model.transformer.wte.weight
assert wte.dtype == torch.bfloat16, wte.dtype
# The trainer's bf16 weights as the model file holds them: exactly the exported values.
assert ours["pre.embedding.weight"].dtype == torch.bfloat16
assert torch.equal(wte, ours["pre.embedding.weight"]), "the token table changed in export"
print(f"bf16 GPT: {type(model).__name__} in {wte.dtype}, token table equal to the checkpoint's")
PY
echo "hf export checks passed"
