#!/usr/bin/env bash
# Usage: roundtrip.sh MISTC MODEL.mist WORKDIR
# For every prefix of the default pipeline: print the IR, parse it back with
# `-x ir`, print again; the two texts must be identical. Then continue the
# pipeline from the parsed text and compare with the direct compilation.
set -euo pipefail
mistc=$1 model=$2 work=$3
mkdir -p "$work"
stages=(shape-infer shape-infer,tp-shard shape-infer,tp-shard,backward
        shape-infer,tp-shard,backward,cost-model)
for i in "${!stages[@]}"; do
  "$mistc" "$model" --passes="${stages[$i]}" --emit=ir -o "$work/$i.mir"
  "$mistc" -x ir "$work/$i.mir" --passes= --emit=ir -o "$work/$i.again.mir"
  diff -u "$work/$i.mir" "$work/$i.again.mir"
  echo "stage $i (${stages[$i]}): print -> parse -> print identical"
done
"$mistc" -x ir "$work/0.mir" --emit=costed-ir -o "$work/resumed.mir"
"$mistc" "$model" --emit=costed-ir -o "$work/direct.mir"
diff -u "$work/direct.mir" "$work/resumed.mir"
echo "pipeline resumed from parsed IR matches"
