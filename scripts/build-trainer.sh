#!/usr/bin/env bash
# Emits and builds a trainer for CPU ranks in one step:
#   build-trainer.sh MISTC MODEL.mist PLAN.yaml OUT [mistc flags...]
# writes OUT.cu (mistc --emit=trainer, cluster a100-40g unless a flag says
# otherwise) and builds OUT with the build line in OUT.cu's header
# (TRAINER_OPT, if set, replaces its -O2; TRAINER_BUILD, if set, is another
# build folder of this tree whose runtime libraries it links, e.g. build-tsan/;
# TRAINER_CXXFLAGS are added, e.g. -fsanitize=thread).
set -euo pipefail
[[ $# -ge 4 ]] || { echo "usage: build-trainer.sh MISTC MODEL.mist PLAN.yaml OUT [mistc flags...]" >&2; exit 2; }
mistc=$1 model=$2 plan=$3 out=$4
shift 4
cluster=(--cluster a100-40g)
for flag in "$@"; do [[ $flag == --cluster* ]] && cluster=(); done
"$mistc" "$model" "${cluster[@]}" "$@" --plan "$plan" --emit=trainer -o "$out.cu"
dir=$(dirname "$out") name=$(basename "$out")
line=$(grep -m1 '^//   mpicxx' "$out.cu" | sed "s|^//   ||;s| train.cu | $name.cu |;s|-o train\$|-o $name|")
[[ -n $line ]] || { echo "build-trainer.sh: no build line in $out.cu" >&2; exit 1; }
# The line asks the mistc on PATH for the runtime's flags; this one's are meant.
[[ $line != *'$(mistc --print-build-flags)'* ]] ||
  line=${line/'$(mistc --print-build-flags)'/$("$mistc" --print-build-flags)}
# TRAINER_OPT=-O0 compiles train.cu itself unoptimized: it is straight-line
# calls into the runtime libraries (built as they are), so only compile time
# changes. The test suites that build dozens of trainers set it.
if [[ -n ${TRAINER_OPT:-} ]]; then line=${line/ -O2 / $TRAINER_OPT }; fi
if [[ -n ${TRAINER_BUILD:-} ]]; then
  ours=$(grep -o '[^ ]*/runtime/trainer/libmistrtTrainer.a' <<<"$line" | sed 's|/runtime/trainer/libmistrtTrainer.a$||')
  line=${line//$ours\//$(cd "$TRAINER_BUILD" && pwd)/}
fi
if [[ -n ${TRAINER_CXXFLAGS:-} ]]; then line=${line/ -DMIST_CPU / -DMIST_CPU $TRAINER_CXXFLAGS }; fi
# The build tree's precompiled runtime headers for that -O level, where it has them
# (runtime/trainer/TrainerHeaders.h): the same program, compiled in a third of the time.
opt=${TRAINER_OPT:--O2}
build=$(grep -o '[^ ]*/runtime/trainer/libmistrtTrainer.a' <<<"$line" | sed 's|/runtime/trainer/libmistrtTrainer.a$||')
pch=$build/trainer-pch/${opt#-}
if [[ -n $build && -f $pch/TrainerHeaders.h.gch ]]; then
  line=${line/ -DMIST_CPU / -DMIST_CPU -I$pch -include TrainerHeaders.h }
fi
(cd "$dir" && eval "$line")
