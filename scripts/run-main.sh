#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, compile the
# GPT-3 1.3B example to costed IR and print its summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
mistc="${BUILD_DIR:-$root/build}/bin/mistc"
out="${BUILD_DIR:-$root/build}/gpt3-1.3b.mir"
"$mistc" "$root/examples/gpt3-1.3b.mist" --emit=costed-ir -o "$out"
echo "costed IR written to $out ($(wc -l < "$out") lines)"
"$mistc" "$root/examples/gpt3-1.3b.mist" --emit=summary
