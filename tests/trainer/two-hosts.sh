#!/usr/bin/env bash
# Multi-host runs on one machine (issue 25): two hosts made with network
# namespaces (tests/trainer/fake-hosts.sh: own hostnames, a TCP link, a
# node-local folder each, the rest of the filesystem shared) run the
# generated trainer under mpirun with Open MPI's daemon started through the
# namespaces. Checks:
#   - a dp 2 job with one rank per host trains exactly as on one host, warns
#     that its stage spans more hosts than its mesh has nodes, and resumes
#     across the hosts from a shared checkpoint folder with the same losses;
#   - a tp 2 x dp 2 job mapped round-robin by node (each tp group split over
#     the hosts) is refused, naming the launcher option that fixes it, and
#     runs when asked to (--any-placement);
#   - a node-local checkpoint folder is refused before the first step;
#   - a resume where one host lacks the checkpoint, or holds an older one,
#     ends with one message naming both hosts and what each found.
# Every job has a time limit, so a hang fails the test.
#   two-hosts.sh MISTC MODEL.mist WORKDIR       (exit 77: no namespaces here)
set -euo pipefail
mistc=$1 model=$2 work=$3
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work" && mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "two-hosts.sh: $*" >&2; exit 1; }

hosts="$work/hosts"
"$here/fake-hosts.sh" up "$hosts" hosta hostb || exit $?
trap '"$here/fake-hosts.sh" down "$hosts"' EXIT

plan() { # plan NAME DP TP GPUS_PER_NODE
  printf 'mist_plan: 1\nmodel: tiny_gpt\nglobal_batch: 16\ngrad_accum: 2\nstages:\n  - layers: [0, 1]\n    mesh: {nodes: 1, gpus_per_node: %s}\n    micro_batch: %s\n    dp: %s\n    tp: %s\n' \
    "$4" $((8 / $2)) "$2" "$3" >"$work/$1.yaml"
  "$here/../../scripts/build-trainer.sh" "$mistc" "$model" "$work/$1.yaml" "$work/$1" >/dev/null
}
plan dp2 2 1 2
plan tp2dp2 2 2 4

# on2 LOG ARGS...: mpirun on hosta over both hosts (ARGS: mpirun's, then the program's).
on2() {
  local log=$1; shift
  timeout 120 "$hosts/enter-hosta" mpirun --mca plm_rsh_agent "$hosts/agent" \
    --mca btl_tcp_if_include 10.213.0.0/16 --mca oob_tcp_if_include 10.213.0.0/16 \
    --oversubscribe "$@" >"$log" 2>&1
}
lossOf() { sed -n "s/^step *$1 *loss \([^ ]*\) .*/\1/p" "$2"; }
# refused NAME PATTERN ARGS...: the job fails and its output matches PATTERN.
refused() {
  local name=$1 pattern=$2; shift 2
  if on2 "$work/$name.log" "$@"; then cat "$work/$name.log"; fail "$name: the job ran"; fi
  grep -qE "$pattern" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no '$pattern'"; }
  # Each rank that found it says it (per-rank output files hold it too).
  grep -qE "mistrt: rank [1-9][0-9]*: .*$pattern" "$work/$name.log" ||
    { cat "$work/$name.log"; fail "$name: only rank 0 said why"; }
  echo "$name: refused: $(grep -oE "mistrt: rank 0: .{0,160}" "$work/$name.log" | head -1)..."
}

# One host, the reference.
timeout 120 mpirun --oversubscribe -np 2 "$work/dp2" --steps 4 --log-every 1 >"$work/one-host.log" 2>&1 ||
  { cat "$work/one-host.log"; fail "the one-host run failed"; }

# dp 2, a rank on each host, checkpoints in a shared folder: stop after 2, resume to 4.
on2 "$work/split.log" --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 4 --log-every 1 \
  --ckpt-dir "$work/shared" --ckpt-every 2 --stop-after 2 || { cat "$work/split.log"; fail "the two-host run failed"; }
grep -q "ranks on hosts hosta (rank 0), hostb (rank 1)" "$work/split.log" ||
  { cat "$work/split.log"; fail "the log does not say where the ranks run"; }
grep -q "warning: placement: stage 0 (a mesh of 1 node x 2 GPUs) runs on 2 hosts" "$work/split.log" ||
  { cat "$work/split.log"; fail "no warning that the stage spans more hosts than its mesh has nodes"; }
on2 "$work/resumed.log" --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 4 --log-every 1 \
  --ckpt-dir "$work/shared" --resume || { cat "$work/resumed.log"; fail "the two-host resume failed"; }
for s in 1 2 3 4; do
  log="$work/split.log"; [[ $s -gt 2 ]] && log="$work/resumed.log"
  [[ -n $(lossOf $s "$work/one-host.log") && $(lossOf $s "$log") == "$(lossOf $s "$work/one-host.log")" ]] ||
    fail "step $s: loss $(lossOf $s "$log") on two hosts, $(lossOf $s "$work/one-host.log") on one"
done
echo "dp 2 over two hosts: losses of steps 1-4 (2 of them after a resume) equal the one-host run's"

# Round-robin mapping splits every tp group over the hosts.
refused tp-split "placement: stage 0: 2 of its 2 tp groups span hosts .*mpirun --map-by ppr:8:node" \
  --host hosta:2,hostb:2 -np 4 --map-by node "$work/tp2dp2" --steps 1
on2 "$work/tp-forced.log" --host hosta:2,hostb:2 -np 4 --map-by node "$work/tp2dp2" --steps 1 --any-placement ||
  { cat "$work/tp-forced.log"; fail "--any-placement did not run the job"; }
grep -q "warning: placement: stage 0: 2 of its 2 tp groups span hosts" "$work/tp-forced.log" ||
  fail "--any-placement ran without the warning"
on2 "$work/tp-packed.log" --host hosta:2,hostb:2 -np 4 "$work/tp2dp2" --steps 1 ||
  { cat "$work/tp-packed.log"; fail "the packed tp 2 x dp 2 job failed"; }
! grep -q "tp group" "$work/tp-packed.log" || fail "a packed placement was said to split tp groups"
echo "tp 2 x dp 2: refused when mapped by node, runs with --any-placement (warned) and when packed"

# A folder that is local to each host.
refused local-folder "not every rank sees the checkpoint folder $hosts/local/ck that rank 0 writes \(hosta \(rank 0\): sees it; hostb \(rank 1\): cannot open" \
  --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 2 --ckpt-dir "$hosts/local/ck"

# Resume from node-local copies: hostb has none, then an older one.
mkdir -p "$hosts/local-hosta/ck" "$hosts/local-hostb/ck"
cp "$work/shared/"*.safetensors "$hosts/local-hosta/ck/"
refused resume-missing "the ranks did not find the same checkpoint in $hosts/local/ck \(hosta \(rank 0\): step 4, checkpoint [0-9a-f]{16}; hostb \(rank 1\): no checkpoint in" \
  --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 6 --ckpt-dir "$hosts/local/ck" --resume
timeout 120 mpirun --oversubscribe -np 2 "$work/dp2" --steps 2 --ckpt-dir "$work/older" >/dev/null 2>&1 ||
  fail "the run writing an older checkpoint failed"
cp "$work/older/"*.safetensors "$hosts/local-hostb/ck/"
refused resume-older "the ranks did not find the same checkpoint .*\(hosta \(rank 0\): step 4, checkpoint [0-9a-f]{16}; hostb \(rank 1\): step 2, checkpoint [0-9a-f]{16}\)" \
  --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 6 --ckpt-dir "$hosts/local/ck" --resume
# Identical node-local copies resume the same checkpoint, but rank 0's next
# save would reach its host only: refused at start too.
rm -rf "$hosts/local-hosta/ck" "$hosts/local-hostb/ck"
mkdir -p "$hosts/local-hosta/ck" "$hosts/local-hostb/ck"
cp "$work/shared/"*.safetensors "$hosts/local-hosta/ck/"
cp "$work/shared/"*.safetensors "$hosts/local-hostb/ck/"
refused resume-identical-copies "not every rank sees the checkpoint folder $hosts/local/ck that rank 0 writes \(hosta \(rank 0\): sees it; hostb \(rank 1\): (cannot open|reads another job)" \
  --host hosta:1,hostb:1 -np 2 "$work/dp2" --steps 6 --ckpt-dir "$hosts/local/ck" --resume
echo "two-host checks passed"
