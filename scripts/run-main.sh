#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, compile the
# GPT-3 1.3B example (summary of parameters and per-layer costs), then tune a
# training plan for it on the built-in 8 x A100-40GB preset and print the
# plan's predicted report. (Emitting and running the trainer on CPU ranks
# comes with the runtime, not built yet.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build="${BUILD_DIR:-$root/build}"
mistc="$build/bin/mistc"
"$mistc" "$root/examples/gpt3-1.3b.mist" --emit=summary
echo
"$mistc" "$root/examples/gpt3-1.3b.mist" --cluster a100-40g --emit=plan -o "$build/gpt3-1.3b.plan.yaml"
echo "plan written to $build/gpt3-1.3b.plan.yaml"
echo
"$mistc" "$root/examples/gpt3-1.3b.mist" --cluster a100-40g --plan "$build/gpt3-1.3b.plan.yaml" --emit=report
