#!/usr/bin/env bash
# Installs the frameworks whose own parsers check mistc's exports into a
# virtual environment (PyPI only; torch brings its CUDA libraries, about 5 GB):
#   setup-venv.sh [VENV]        (default: .venv-exports in the repository root)
# The versions are the ones the exporters target (docs/exports.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$root/.venv-exports}
python3 -m venv "$venv"
"$venv/bin/pip" install -q torch
"$venv/bin/pip" install -q deepspeed==0.19.8 megatron-core==0.16.1 torchtitan==0.3.0 pyyaml typing_extensions \
  tokenizers safetensors transformers
"$venv/bin/python" -c "import deepspeed, megatron.core, torchtitan; print('frameworks ready in $venv')"
