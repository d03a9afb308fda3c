#!/usr/bin/env bash
# Stopping a run and going on (issue 48): --stop-after N (and Megatron-LM's
# name, --exit-interval) saves a checkpoint of step N before it leaves, and
# the resumed run goes on as the uninterrupted one; SIGUSR1 (Slurm's
# --signal) sent to one rank of a dp 2 job stops every rank after the step
# under way, with a checkpoint, exit 0; a resume compares the data by what
# the file holds: a copy under another path is the same data, another file
# under the old path is not (a warning names both); a rank killed ends the
# job (mpirun names it) and the survivor says which step it was in.
#   stopping.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$1 model=$2 work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "stopping.sh: $*" >&2; exit 1; }
lossOf() { sed -n "s/^step *$1 *loss \([^ ]*\) .*/\1/p" "$2"; }
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-2ranks.yaml" "$work/train"
python3 "$root/scripts/make-tokens.py" "$root/docs/tutorial.md" --out "$work/a.bin" >/dev/null
python3 "$root/scripts/make-tokens.py" "$root/docs/runtime.md" --out "$work/b.bin" >/dev/null
run() { timeout 300 mpirun --oversubscribe -np 2 "$work/train" --log-every 1 --data "$work/data.bin" "$@" </dev/null; }
# untilStep N LOG: waits (up to a minute) until the job logging to LOG is past step N.
untilStep() {
  for _ in $(seq 600); do
    grep -q "^step *$1 " "$2" 2>/dev/null && return
    sleep 0.1
  done
}

# --stop-after saves; the resume goes on as if never stopped.
cp "$work/a.bin" "$work/data.bin"
rm -rf "$work/full" "$work/cut"
run --steps 6 >"$work/full.log"
run --steps 6 --ckpt-dir "$work/cut" --exit-interval 3 >"$work/cut.log"
grep -q "stopping after step 3 (--stop-after); resume with --ckpt-dir $work/cut --resume" "$work/cut.log" ||
  fail "--exit-interval 3 did not say it stopped after step 3: $(tail -2 "$work/cut.log")"
[[ -f $work/cut/model.safetensors ]] || fail "--stop-after wrote no checkpoint"
# The same tokens under another path: no warning.
mv "$work/data.bin" "$work/moved.bin"
timeout 300 mpirun --oversubscribe -np 2 "$work/train" --log-every 1 --data "$work/moved.bin" \
  --steps 6 --ckpt-dir "$work/cut" --resume </dev/null >"$work/resumed.log" 2>"$work/resumed.err"
! grep -q "other batches" "$work/resumed.err" || fail "a copy of the data under another path was taken for other data"
for s in 4 6; do
  [[ $(lossOf $s "$work/resumed.log") == "$(lossOf $s "$work/full.log")" ]] ||
    fail "resumed step $s loss $(lossOf $s "$work/resumed.log") differs from the uninterrupted $(lossOf $s "$work/full.log")"
done
# Another file under the checkpoint's own path: a warning naming both.
rm -rf "$work/cut2"
cp "$work/a.bin" "$work/data.bin"
run --steps 6 --ckpt-dir "$work/cut2" --stop-after 2 >/dev/null
cp "$work/b.bin" "$work/data.bin"
run --steps 6 --ckpt-dir "$work/cut2" --resume >/dev/null 2>"$work/other.err"
grep -q "trains on other batches" "$work/other.err" || fail "another file under the same path was not noticed"

# SIGUSR1 to one rank: every rank stops after the step under way and saves.
rm -rf "$work/signal"
cp "$work/a.bin" "$work/data.bin"
run --steps 1000000 --ckpt-dir "$work/signal" >"$work/signal.log" 2>&1 &
job=$!
untilStep 3 "$work/signal.log"
rank=$(pgrep -f "^$work/train " | head -1)
[[ -n $rank ]] || fail "no trainer process to signal"
kill -USR1 "$rank"
wait "$job" || fail "the signalled job exited with status $?: $(tail -3 "$work/signal.log")"
grep -q "stopping after step [0-9]* (SIGUSR1); resume with" "$work/signal.log" ||
  fail "SIGUSR1 did not stop the run cleanly: $(tail -3 "$work/signal.log")"
[[ -f $work/signal/model.safetensors ]] || fail "the signalled run wrote no checkpoint"

# A rank killed: mpirun names it and ends the job; the survivor says which
# step it was in when the launcher's SIGTERM came.
rm -rf "$work/killed"
run --steps 1000000 --ckpt-dir "$work/killed" >"$work/killed.log" 2>&1 &
job=$!
untilStep 3 "$work/killed.log"
victim=$(pgrep -f "^$work/train " | tail -1)
kill -KILL "$victim"
if wait "$job"; then fail "the job with a killed rank exited 0"; fi
grep -qE "mistrt: rank [0-9]+ \([^)]*\): SIGTERM during step [0-9]+" "$work/killed.log" ||
  fail "the surviving rank did not say where it was: $(tail -5 "$work/killed.log")"
echo "stopping.sh: --stop-after and SIGUSR1 save and leave; resumes compare the data by content;"
echo "  a killed rank ends the job, the survivor naming its step: $(grep -oE "rank [0-9]+ \([^)]*\): SIGTERM during step [0-9]+" "$work/killed.log" | head -1)"
