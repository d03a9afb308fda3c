#!/usr/bin/env bash
# Failures stop the whole job quickly with a message naming the rank and the
# cause, never a hang: unreadable data, a token outside the vocabulary, a
# non-finite loss, the wrong number of ranks, a bad flag, a checkpoint folder
# that cannot be written; and more threads than cores is said, not failed.
#   failures.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 model=$2 work=$3
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat >"$work/plan.yaml" <<'PLAN'
mist_plan: 1
global_batch: 8
grad_accum: 1
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: 2}
    micro_batch: 4
    dp: 2
    tp: 1
PLAN
build="$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-trainer.sh"
"$build" "$mistc" "$model" "$work/plan.yaml" "$work/train"
# expect NAME PATTERN ARGS...: the job fails within 60 s and prints PATTERN.
expect() {
  local name=$1 pattern=$2; shift 2
  local start=$SECONDS
  if timeout 60 mpirun --oversubscribe -np "${RANKS:-2}" "${TRAIN:-$work/train}" "$@" >"$work/$name.txt" 2>&1; then
    echo "$name: the job succeeded"; cat "$work/$name.txt"; exit 1
  fi
  grep -qE "$pattern" "$work/$name.txt" || { echo "$name: no '$pattern' in:"; cat "$work/$name.txt"; exit 1; }
  echo "$name: stopped after $((SECONDS - start)) s: $(grep -E "$pattern" "$work/$name.txt" | head -1)"
}
expect missing-data 'mistrt: rank [01]: .*nope.bin' --steps 2 --data "$work/nope.bin"
python3 - "$work/big.bin" <<'PY'
import struct, sys
tokens = [300] * 200  # beyond the tiny GPT's 256-token vocabulary
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
PY
expect out-of-vocabulary 'mistrt: rank [01]: .*300' --steps 2 --data "$work/big.bin"
expect non-finite 'mistrt: rank [01]: non-finite (loss|gradient norm)' --steps 50 --lr 1e30
# With the streams on threads of their own (a worker may be inside MPI when
# the job is stopped): the same message, no hang.
expect non-finite-overlap 'mistrt: rank [01]: non-finite (loss|gradient norm)' --steps 50 --lr 1e30 --overlap
RANKS=1 expect wrong-ranks 'mistrt: rank 0: the plan needs 2 ranks \(stage 0: dp 2 x tp 1\), the job has 1 \(started by mpirun \(Open MPI\); mpirun -np 2 ' --steps 1
# The advice speaks the launcher found: none (the binary run alone), or srun.
expectAlone() {
  local name=$1 pattern=$2; shift 2
  if env -u OMPI_COMM_WORLD_SIZE timeout 60 "$@" "$work/train" --steps 1 >"$work/$name.txt" 2>&1; then
    echo "$name: the job succeeded"; cat "$work/$name.txt"; exit 1
  fi
  grep -qE "$pattern" "$work/$name.txt" || { echo "$name: no '$pattern' in:"; cat "$work/$name.txt"; exit 1; }
  echo "$name: $(grep -oE "$pattern" "$work/$name.txt" | head -1)"
}
expectAlone alone 'the job has 1 \(launch 2 ranks, e\.g\. mpirun -np 2 .* or srun -n 2 --mpi=pmix ' env
expectAlone under-srun 'the job has 1 \(started by srun \(Slurm\); srun -n 2 --mpi=pmix ' \
  env SLURM_STEP_ID=0 SLURM_PROCID=0
expect bad-flag 'unknown flag --bogus' --bogus
# --print-sbatch needs no launcher: a script bash accepts, passing the other flags on.
"$work/train" --print-sbatch --steps 5 --data "$work/my tokens.bin" >"$work/sbatch.sh"
bash -n "$work/sbatch.sh" || { cat "$work/sbatch.sh"; echo "sbatch: not a valid script"; exit 1; }
grep -q "^srun --mpi=pmix --kill-on-bad-exit=1 --ntasks-per-node=2 --distribution=block:block --cpu-bind=cores $work/train --steps 5 --data '$work/my tokens.bin'\$" \
  "$work/sbatch.sh" || { cat "$work/sbatch.sh"; echo "sbatch: no srun line for the plan"; exit 1; }
echo "sbatch: $(grep -c '^#SBATCH' "$work/sbatch.sh") #SBATCH lines, $(grep '^srun' "$work/sbatch.sh" | cut -c1-60)..."
expect bad-threads 'mistrt: --threads takes 1 to 1024 threads per rank' --threads 0
# A new run does not overwrite a checkpoint; a second job on a folder stops
# at start; a dead job's lock is taken over.
rm -rf "$work/held" && mkdir -p "$work/held"
timeout 60 mpirun --oversubscribe -np "${RANKS:-2}" "$work/train" --steps 1 --ckpt-dir "$work/held" >/dev/null
expect checkpoint-not-overwritten "mistrt: rank 0: the checkpoint folder .*held holds a checkpoint \(model.safetensors\): pass --resume" \
  --steps 1 --ckpt-dir "$work/held"
echo "$(hostname) $$ $(date +%s)" > "$work/held/.mistrt-lock" # this script: alive
expect folder-locked "mistrt: rank 0: another job is using the checkpoint folder .*held" \
  --steps 2 --ckpt-dir "$work/held" --resume
echo "$(hostname) 2147483646 0" > "$work/held/.mistrt-lock" # no such process
timeout 60 mpirun --oversubscribe -np "${RANKS:-2}" "$work/train" --steps 2 --ckpt-dir "$work/held" \
  --resume > "$work/takeover.txt" 2>&1 || { cat "$work/takeover.txt"; exit 1; }
grep -q "mistrt: taking over the lock of a job that ended without releasing it" "$work/takeover.txt" ||
  { cat "$work/takeover.txt"; exit 1; }
[[ ! -e $work/held/.mistrt-lock ]] || { echo "the lock outlived its job"; exit 1; }
echo "stale-lock: taken over and released"
# Rates the trainer's float cannot hold, and a wsd knob without wsd.
expect lr-inf 'mistrt: --lr takes a positive learning rate between 1.2e-38 and 3.4e\+38, not inf' --lr inf
expect lr-overflow 'mistrt: --lr takes a positive learning rate between 1.2e-38 and 3.4e\+38, not 1e39' --lr 1e39
expect min-lr-nan 'mistrt: --min-lr takes a learning rate >= 0 \(a float\), not nan' --min-lr nan
expect decay-fraction-without-wsd 'mistrt: --decay-fraction is the decaying part of a wsd schedule; this run.s decay is cosine' --steps 1 --decay-fraction 0.5
# More threads than the cores a rank may use is no failure, but the log says
# so and how to launch instead (the job here is confined to one core).
timeout 60 taskset -c 0 mpirun --oversubscribe -np 2 "$work/train" --steps 1 --threads 2 \
  >"$work/threads.txt" 2>&1 || { echo "threads: the job failed"; cat "$work/threads.txt"; exit 1; }
grep -q "2 threads per rank (but rank 0 may use only 1 core(s): give each rank its cores" \
  "$work/threads.txt" || { echo "threads: no warning in:"; cat "$work/threads.txt"; exit 1; }
echo "threads: $(grep -o 'but rank 0 may use only 1 core.*' "$work/threads.txt")"
# A checkpoint folder that cannot take a file fails the job before training,
# not at its first save (even root cannot create files in /proc/self).
expect unwritable-checkpoints 'mistrt: rank 0: the checkpoint folder /proc/self cannot take a file' \
  --steps 50 --synthetic --ckpt-dir /proc/self
# In a pipeline the last stage sees the loss: the job still stops, naming it.
cat >"$work/pp.yaml" <<'PLAN'
mist_plan: 1
global_batch: 8
grad_accum: 2
stages:
  - layers: [0, 0]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: 4
    dp: 1
    tp: 1
  - layers: [1, 1]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: 4
    dp: 1
    tp: 1
PLAN
# Built over ./train: it also has two ranks.
"$build" "$mistc" "$model" "$work/pp.yaml" "$work/train"
expect pipeline-non-finite 'mistrt: rank 1: non-finite loss' --steps 50 --lr 1e30
expect pipeline-non-finite-overlap 'mistrt: rank 1: non-finite loss' --steps 50 --lr 1e30 --overlap
# edited_trainer NAME PLAN PRESENT EDIT: PLAN's train.cu with the sed script
# EDIT applied (PRESENT, a line it must have, keeps an edit from silently
# missing), built as $work/NAME.
edited_trainer() {
  local name=$1 plan=$2 present=$3 edit=$4 line
  "$mistc" "$model" --cluster a100-40g --plan "$plan" --emit=trainer -o "$work/$name.cu" 2>/dev/null
  grep -q "$present" "$work/$name.cu"
  sed -i "$edit" "$work/$name.cu"
  line=$(grep -m1 '^//   mpicxx' "$work/$name.cu" | sed "s|^//   ||;s| train.cu | $name.cu |;s|-o train\$|-o $name|")
  [[ $line != *'$(mistc --print-build-flags)'* ]] ||
    line=${line/'$(mistc --print-build-flags)'/$("$mistc" --print-build-flags)}
  (cd "$work" && eval "$line")
}
# train.cu runs the stage schedule mistc priced as one call per step; a
# hand edit that breaks what the steps need is stopped, naming the step.
# A forward that no longer runs layer 0's optimizer step would compute with
# stale weights: step 2 (the first with an update pending) stops on it.
edited_trainer stale "$work/plan.yaml" '^    r.optimizerStep(l); ' \
  '0,/^    r.optimizerStep(l); /{/^    r.optimizerStep(l); /d}'
TRAIN="$work/stale" expect stale-weights "mistrt: rank [01]: stage 0's schedule runs the forward of layer 0 before its optimizer step" --steps 3
# A step naming a layer the stage does not hold: the loop over its layers
# edited to run one layer more.
edited_trainer wrong-layer "$work/plan.yaml" '^  for (int l = 0; l <= 1; ++l) {' \
  's/^  for (int l = 0; l <= 1; ++l) {/  for (int l = 0; l <= 2; ++l) {/'
TRAIN="$work/wrong-layer" expect wrong-layer "mistrt: rank [01]: stage 0's schedule names layer 2, which is not on the stage \\(layers 0-1\\)" --steps 2
# A 1F1B order that runs a micro-batch's backward before its forward.
RANKS=2 edited_trainer early-backward "$work/pp.yaml" '^  s1_backward(r, 0);' \
  's/^  s1_backward(r, 0);/  s1_backward(r, 1);/'
RANKS=2 TRAIN="$work/early-backward" expect early-backward 'mistrt: rank 1: the schedule runs the backward of micro-batch 1 before its forward' --steps 2
echo "failure checks passed"
