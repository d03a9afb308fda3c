#!/usr/bin/env bash
# A new user's first try (the design card's command, no cluster named):
# `mistc examples/tiny-gpt.mist -o train.cu` plans for this machine's CPU
# cores (preset host), and the build line and run line in train.cu's header
# give a trainer that trains here.
#   first-try.sh MISTC WORKDIR
set -euo pipefail
mistc=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
cd "$work"
rm -f train train.cu train.plan.yaml
"$mistc" "$root/examples/tiny-gpt.mist" -o train.cu 2> mistc.log
grep -q "no cluster named: planning for this machine's CPU cores" mistc.log ||
  { cat mistc.log; echo "first-try.sh: mistc did not say it plans for this machine"; exit 1; }
build=$(grep -m1 '^//   mpicxx' train.cu | sed 's|^//   ||')
build=${build//'$(mistc --print-build-flags)'/$("$mistc" --print-build-flags)}
eval "$build"
ranks=$(sed -n 's|^// Run: mpirun -np \([0-9]*\) ./train .*|\1|p' train.cu)
[[ -n $ranks ]] || { echo "first-try.sh: no run line in train.cu's header"; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
  mpirun --oversubscribe -np "$ranks" ./train --steps 3 </dev/null | tee run.log | grep '^step'
[[ $(grep -c '^step' run.log) == 3 ]] || { echo "first-try.sh: the trainer did not train 3 steps"; exit 1; }
echo "first-try.sh: planned for this machine ($ranks ranks) and trained"
