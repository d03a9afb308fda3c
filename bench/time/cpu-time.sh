#!/usr/bin/env bash
# The time model against the trainer, on one CPU rank: the method of the H100
# prediction-accuracy check (bench/h100/), run where there is no GPU.
#  1. mistc lists the ops and shapes every plan below looks up
#     (--emit=profile-shapes); mist-profile-cpu times them with the trainer's
#     CPU ops on this machine's CPU and writes a cluster file whose "GPU" is
#     one core (tools/profiler/MistProfileCpu.cpp).
#  2. For each plan, mistc predicts the iteration time on that cluster
#     (--emit=report) and the generated trainer runs it on one CPU rank; the
#     measured time is the median over steps 2-N of the step time the
#     trainer logs (tokens per step / its tokens/s).
#  Each op is timed with the caches as the trainer's step leaves them
#  (evicted, then the inputs the ops just before it wrote read back:
#  tools/profiler/CpuOpTimer.h).
#  Plans on two ranks (dp, tp, a two-stage pipeline) run on two cores under
#  mpirun and are priced on a cluster measured by mist-profile-cpu on two
#  ranks: the ops timed on both cores at once (the ranks share the caches
#  and memory bandwidth), MPI's collectives and p2p links, the rest from
#  --base, the one-rank file, on which the one-rank plans are priced.
# Models: a 4-layer GPT and a 4-layer Llama (GQA, RoPE, SwiGLU), hidden 128,
# sequence 128, in fp32 and in bf16 (bf16 weights and activations, fp32
# masters and gradients; its clusters are profiled in bf16: mist-profile-cpu
# --dtype bf16). Plans differ in micro-batch, G, checkpointed layers,
# offloading, dp, tp and pipeline stages; the ov-* plans (dp 2 with ZeRO-1/2/3,
# offload, a pipeline) run the trainer with --overlap and are priced on the
# same clusters with the interference table of mist-profile-cpu --overlap
# (two-rank plans: timed on both ranks at once). Run it on an idle machine with two
# cores: it is a timing (about 13 minutes).
#   cpu-time.sh MISTC BUILD [OUT.json]   (env: STEPS, REPEATS, ONLY: a regular
#                                         expression picking plans by name;
#                                         REGIONS=1: one-rank plans also region
#                                         by region, OUT-regions.json)
# Prints a table; writes OUT.json (default bench/results/time-cpu.json) and
# the measured clusters beside it (time-cpu-cluster-{gpt,llama}[-bf16].yaml,
# two cores, and ...-one-core.yaml). KEEP=1 keeps the work folder (printed).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: cpu-time.sh MISTC BUILD [OUT.json]" >&2; exit 2; }
mistc=$1 build=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/time-cpu.json}
profile=$build/bin/mist-profile-cpu
steps=${STEPS:-4}
[[ -x $profile ]] || { echo "cpu-time.sh: $profile is not built" >&2; exit 2; }
work=$(mktemp -d)
if [[ -n ${KEEP:-} ]]; then echo "cpu-time.sh: work folder $work" >&2; else trap 'rm -rf "$work"' EXIT; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cp "$root/bench/time/models/bench-gpt.mist" "$root/bench/time/models/bench-llama.mist" "$work/"

for model in bench-gpt bench-llama; do
  sed 's/dtype = f32/dtype = bf16/;s/^model bench_\([a-z]*\)/model bench_\1_bf16/' "$work/$model.mist" \
    >"$work/$model-bf16.mist"
done

# name model G b ckpt-layers offload-optimizer offload-activations dp tp stages
#   [zero offload-weights overlap]: ZeRO stage 0-3, and 1 to run the trainer
#   with --overlap (streams on threads of their own) and price it on a
#   cluster whose interference table was timed so (mist-profile-cpu --overlap)
plans=(
  "gpt-b4 bench-gpt 2 4 0 0 0 1 1 1"
  "gpt-b2-g4 bench-gpt 4 2 0 0 0 1 1 1"
  "gpt-b8-g1 bench-gpt 1 8 0 0 0 1 1 1"
  "gpt-b4-ck2 bench-gpt 2 4 2 0 0 1 1 1"
  "gpt-b4-ck4 bench-gpt 2 4 4 0 0 1 1 1"
  "gpt-b4-oo50 bench-gpt 2 4 0 0.5 0 1 1 1"
  "gpt-b4-oa50 bench-gpt 2 4 0 0 0.5 1 1 1"
  "llama-b4 bench-llama 2 4 0 0 0 1 1 1"
  "llama-b2-ck2 bench-llama 4 2 2 0 0 1 1 1"
  "gpt-dp2 bench-gpt 2 4 0 0 0 2 1 1"
  "gpt-tp2 bench-gpt 2 4 0 0 0 1 2 1"
  "gpt-pp2-g4 bench-gpt 4 4 0 0 0 1 1 2"
  "llama-pp2-g4 bench-llama 4 4 0 0 0 1 1 2"
  "gpt-b4-bf16 bench-gpt-bf16 2 4 0 0 0 1 1 1"
  "gpt-b2-g4-bf16 bench-gpt-bf16 4 2 0 0 0 1 1 1"
  "gpt-b4-ck2-bf16 bench-gpt-bf16 2 4 2 0 0 1 1 1"
  "gpt-b4-oo50-bf16 bench-gpt-bf16 2 4 0 0.5 0 1 1 1"
  "llama-b4-bf16 bench-llama-bf16 2 4 0 0 0 1 1 1"
  "gpt-dp2-bf16 bench-gpt-bf16 2 4 0 0 0 2 1 1"
  "gpt-tp2-bf16 bench-gpt-bf16 2 4 0 0 0 1 2 1"
  "gpt-pp2-g4-bf16 bench-gpt-bf16 4 4 0 0 0 1 1 2"
  # Where overlap matters (issue 18): dp reductions and ZeRO gathers on g2g,
  # offload copies on h2d/d2h, p2p on g2g, each beside compute.
  "ov-dp2-zero1 bench-gpt 2 4 0 0 0 2 1 1 1 0 1"
  "ov-dp2-zero2 bench-gpt 2 4 0 0 0 2 1 1 2 0 1"
  "ov-dp2-zero3 bench-gpt 2 4 0 0 0 2 1 1 3 0 1"
  "ov-ow50 bench-gpt 2 4 0 0 0 1 1 1 0 0.5 1"
  "ov-oo50 bench-gpt 2 4 0 0.5 0 1 1 1 0 0 1"
  "ov-oa50 bench-gpt 2 4 0 0 0.5 1 1 1 0 0 1"
  "ov-pp2-g4 bench-gpt 4 4 0 0 0 1 1 2 0 0 1"
)

# ONLY (a regular expression) keeps the plans whose names match it.
if [[ -n ${ONLY:-} ]]; then
  kept=()
  for p in "${plans[@]}"; do [[ ${p%% *} =~ $ONLY ]] && kept+=("$p"); done
  plans=("${kept[@]}")
  ((${#plans[@]})) || { echo "cpu-time.sh: ONLY='$ONLY' matches no plan" >&2; exit 2; }
fi

# A plan of the 4 layers split evenly over `stages` stages of dp x tp ranks.
plan_yaml() { # G b ckpt oo oa dp tp stages zero ow
  local g=$1 b=$2 ck=$3 oo=$4 oa=$5 dp=$6 tp=$7 stages=$8 zero=$9 ow=${10} i per=$((4 / $8))
  echo "mist_plan: 1"
  echo "global_batch: $((dp * g * b))"
  echo "grad_accum: $g"
  echo "stages:"
  for ((i = 0; i < stages; i++)); do
    echo "  - layers: [$((i * per)), $((i * per + per - 1))]"
    echo "    mesh: {nodes: 1, gpus_per_node: $((dp * tp))}"
    echo "    micro_batch: $b"
    echo "    dp: $dp"
    echo "    tp: $tp"
    echo "    zero: {optimizer: $((zero >= 1)), grads: $((zero >= 2)), weights: $((zero >= 3))}" |
      sed 's/: 1/: true/g;s/: 0/: false/g'

    echo "    ckpt_layers: $ck"
    echo "    offload: {weights: $ow, grads: 0.0, optimizer: $oo, activations: $oa}"
  done
}

# 1. The shapes of every plan, merged per model (a linear_grad with and one
# without bias share a table key, so each model gets its own cluster file),
# and their times on this CPU.
for p in "${plans[@]}"; do
  read -r name model g b ck oo oa dp tp stages zero ow ov <<<"$p"
  plan_yaml "$g" "$b" "$ck" "$oo" "$oa" "$dp" "$tp" "$stages" "${zero:-0}" "${ow:-0.0}" \
    > "$work/$name.yaml"
  "$mistc" "$work/$model.mist" --cluster a100-40g --plan "$work/$name.yaml" \
    --emit=profile-shapes -o "$work/$name.$model.tsv"
done
models=$(for p in "${plans[@]}"; do read -r _ model _ <<<"$p"; echo "$model"; done | sort -u)
for model in $models; do
  dtype=f32
  [[ $model == *-bf16 ]] && dtype=bf16
  {
    echo "# mist-profile-shapes 1"
    echo "# bench/time/cpu-time.sh: the shapes of the $model plans, merged"
    cat "$work"/*."$model".tsv | grep -v '^#' | LC_ALL=C sort -u
  } > "$work/$model.shapes"
  "$profile" --shapes "$work/$model.shapes" --out "$work/$model.yaml" --name "cpu-core-$model" \
    --dtype "$dtype" --repeats "${REPEATS:-5}" --warmup 1 --memory-gib 16 2> "$work/$model.profile.log" ||
    { cat "$work/$model.profile.log" >&2; exit 1; }
  grep -E "memory copy|GEMM|wrote" "$work/$model.profile.log" | sed "s/^/  $model: /" >&2
  mpirun -np 2 "$profile" --base "$work/$model.yaml" --gpus-per-node 2 --out "$work/$model.2.yaml" \
    --shapes "$work/$model.shapes" --dtype "$dtype" --name "cpu-cores-$model" \
    --repeats "${REPEATS:-5}" --warmup 1 2> "$work/$model.links.log" ||
    { cat "$work/$model.links.log" >&2; exit 1; }
  grep -E "all-gather|wrote" "$work/$model.links.log" | sed "s/^/  $model: /" >&2
  # The same clusters with the streams' interference as --overlap runs them
  # (each rank's threads on the node's shared cores), for the overlap plans.
  if printf '%s\n' "${plans[@]}" | awk -v m="$model" '$2 == m && $13 == 1 {f = 1} END {exit !f}'; then
    "$profile" --base "$work/$model.yaml" --out "$work/$model.ov.yaml" --name "cpu-core-$model" \
      --overlap --repeats "${REPEATS:-5}" --warmup 1 2> "$work/$model.ov.log" ||
      { cat "$work/$model.ov.log" >&2; exit 1; }
    mpirun -np 2 "$profile" --base "$work/$model.2.yaml" --gpus-per-node 2 --overlap \
      --out "$work/$model.2.ov.yaml" --name "cpu-cores-$model" --repeats "${REPEATS:-5}" \
      --warmup 1 2> "$work/$model.2.ov.log" || { cat "$work/$model.2.ov.log" >&2; exit 1; }
    grep -h "interference" "$work/$model.ov.log" "$work/$model.2.ov.log" | sed "s/^/  $model: /" >&2
  fi
done

# 2. Prediction and measurement, plan by plan.
printf '%-18s %12s %12s %8s\n' plan "predicted s" "measured s" error
echo "[" > "$out"
sep=""
for p in "${plans[@]}"; do
  read -r name model g b ck oo oa dp tp stages zero ow ov <<<"$p"
  ranks=$((dp * tp * stages))
  cluster=$work/$model # one core busy
  ((ranks > 1)) && cluster+=.2
  overlap=()
  [[ ${ov:-0} == 1 ]] && cluster+=.ov overlap=(--overlap)
  cluster+=.yaml
  predicted=$("$mistc" "$work/$model.mist" --cluster "$cluster" --plan "$work/$name.yaml" \
    --emit=report | sed -n 's/^pipeline: iteration \([0-9.]*\) s.*/\1/p')
  "$mistc" "$work/$model.mist" --cluster "$cluster" --plan "$work/$name.yaml" \
    --emit=trainer -o "$work/$name.cu" 2>/dev/null
  "$root/scripts/compile-trainer.sh" cpu "$work/$name.cu" "$build" "$work/$name" > /dev/null
  tokens_per_step=$((dp * g * b * 128))
  trace=()
  [[ ${REGIONS:-0} == 1 && $ranks == 1 ]] && trace=(--trace "$work/$name.trace.json")
  mapfile -t rates < <(mpirun -np "$ranks" "$work/$name" --steps "$steps" --log-every 1 --synthetic "${overlap[@]}" "${trace[@]}" |
    sed -n 's/^step *\([0-9]*\) .* \([0-9.]*\) tokens\/s .*/\1 \2/p')
  if ((${#trace[@]})); then # the last step, region by region, against the report's regions
    "$mistc" "$work/$model.mist" --cluster "$cluster" --plan "$work/$name.yaml" --emit=report \
      > "$work/$name.report" 2>/dev/null
    python3 "$root/bench/h100/compare-regions.py" "$work/$name.report" "$work/$name.trace.json" \
      "$work/$name.regions.json" | sed "s/^/  $name: /"
  fi
  measured=$(printf '%s\n' "${rates[@]}" | python3 -c "
import statistics, sys
rates = [float(l.split()[1]) for l in sys.stdin if l.strip() and int(l.split()[0]) >= 2]
print(f'{$tokens_per_step / statistics.median(rates):.4f}' if rates else '')")
  if [[ -z $predicted || -z $measured ]]; then
    echo "$name: no prediction ('$predicted') or no measurement ('$measured')" >&2
    exit 1
  fi
  error=$(python3 -c "print(f'{($predicted - $measured) / $measured:+.1%}')")
  printf '%-18s %12s %12s %8s\n' "$name" "$predicted" "$measured" "$error"
  printf '%s  {"plan": "%s", "model": "%s", "grad_accum": %s, "micro_batch": %s, "ckpt_layers": %s, "offload_optimizer": %s, "offload_activations": %s, "offload_weights": %s, "zero": %s, "dp": %s, "tp": %s, "stages": %s, "ranks": %s, "overlap": %s, "predicted_iteration_s": %s, "measured_iteration_s": %s, "steps": %s}' \
    "$sep" "$name" "$model" "$g" "$b" "$ck" "$oo" "$oa" "${ow:-0.0}" "${zero:-0}" "$dp" "$tp" "$stages" "$ranks" "$([[ ${ov:-0} == 1 ]] && echo true || echo false)" "$predicted" "$measured" "$steps" >> "$out"
  sep=$',\n'
done
printf '\n]\n' >> "$out"
if [[ ${REGIONS:-0} == 1 ]]; then
  python3 - "${out%.json}-regions.json" "$work"/*.regions.json <<'PY'
import json, os, sys
json.dump({os.path.basename(p)[:-len(".regions.json")]: json.load(open(p)) for p in sys.argv[2:]},
          open(sys.argv[1], "w"), indent=1)
PY
fi
for model in $models; do # ONLY may have left some out
  cp "$work/$model.2.yaml" "${out%.json}-cluster-${model#bench-}.yaml"
  cp "$work/$model.yaml" "${out%.json}-cluster-${model#bench-}-one-core.yaml"
  if [[ -f $work/$model.ov.yaml ]]; then
    cp "$work/$model.2.ov.yaml" "${out%.json}-cluster-${model#bench-}-overlap.yaml"
    cp "$work/$model.ov.yaml" "${out%.json}-cluster-${model#bench-}-one-core-overlap.yaml"
  fi
done
echo "written $out and the measured clusters beside it"
