#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (never touches build/) and runs one.
#
#   tests/fuzz/run-fuzz.sh mist [SECONDS] [LIBFUZZER-ARGS...]   fuzz .mist source (default 60 s)
#   tests/fuzz/run-fuzz.sh ir   [SECONDS] [LIBFUZZER-ARGS...]   fuzz the textual IR
#   tests/fuzz/run-fuzz.sh yaml [SECONDS] [LIBFUZZER-ARGS...]   fuzz cluster and plan files
#   tests/fuzz/run-fuzz.sh json [SECONDS] [LIBFUZZER-ARGS...]   fuzz the runtime's JSON reader
#   tests/fuzz/run-fuzz.sh safetensors [SECONDS] [ARGS...]      fuzz the safetensors reader
#   tests/fuzz/run-fuzz.sh tokens [SECONDS] [ARGS...]           fuzz the token-file reader
#   tests/fuzz/run-fuzz.sh --build-only [KIND...]               configure and build only (all
#                                                              fuzzers, or those named)
#   tests/fuzz/run-fuzz.sh --repro KIND FILE...                 run inputs once, print the report
#
# A run builds only its own fuzzer (json, safetensors and tokens need only the
# runtime's libraries, not the compiler).
#
# Runs use -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 so that a
# crash does not end the run; every crash/timeout/oom/leak input is left in
# build-fuzz/fuzz/crashes/<target>/. The corpus grows in build-fuzz/fuzz/corpus/<target>/
# (generated, never committed). NO_FORK=1 runs a single libFuzzer process instead,
# which stops at the first crash. Environment: BUILD_DIR (default build-fuzz),
# MISTC (the normal build's mistc, for the IR seeds; default build/bin/mistc),
# JOBS (build parallelism, default 1), NICE (default 10).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-fuzz}
MISTC=${MISTC:-$ROOT/build/bin/mistc}
JOBS=${JOBS:-1}
NICE=${NICE:-10}
FUZZ_DIR=$BUILD/fuzz
KINDS="mist ir yaml json safetensors tokens"

# The body is one function, read whole before it runs: editing this file during a
# long run does not derail it.
main() {
die() { echo "run-fuzz.sh: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: run-fuzz.sh KIND [SECONDS] [ARGS...] | --build-only [KIND...] | --repro KIND FILE... (KIND: $KINDS)"
[[ $(realpath -m "$BUILD") != "$ROOT/build" ]] || die "refusing to use $ROOT/build; pick another BUILD_DIR"

mkdir -p "$BUILD"
# One build or fuzzer at a time per build folder.
exec 9>"$BUILD/.run-fuzz.lock"
flock -n 9 || die "another run-fuzz.sh is using $BUILD"

# Configures if needed, then builds the fuzzer targets given.
build() {
  if [[ ! -f $BUILD/build.ninja ]]; then # not configured, or the last configure failed
    # MIST_WERROR off: clang's warnings in an instrumented build are not the
    # gate (the GCC build is); they must not stop the fuzzers from building.
    nice -n "$NICE" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DMIST_FUZZ=ON -DMIST_WERROR=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  fi
  nice -n "$NICE" cmake --build "$BUILD" --target "$@" -j "$JOBS"
}

target_of() {
  case $1 in
    mist) echo mist-fuzzer ;;
    ir) echo mist-ir-fuzzer ;;
    yaml) echo mist-yaml-fuzzer ;;
    json) echo mist-json-fuzzer ;;
    safetensors) echo mist-safetensors-fuzzer ;;
    tokens) echo mist-token-fuzzer ;;
    *) die "unknown fuzzer '$1' (expected one of: $KINDS)" ;;
  esac
}

export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-14/bin/llvm-symbolizer}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-print_suppressions=0} # suppressions: SanitizerDefaults.cpp

case $1 in
  --build-only)
    shift
    targets=()
    kinds=("$@"); (($#)) || read -ra kinds <<<"$KINDS"
    for kind in "${kinds[@]}"; do targets+=("$(target_of "$kind")"); done
    build "${targets[@]}"
    exit 0 ;;
  --repro)
    [[ $# -ge 3 ]] || die "usage: run-fuzz.sh --repro KIND FILE... (KIND: $KINDS)"
    T=$(target_of "$2"); shift 2
    build "$T" >/dev/null
    exec "$BUILD/bin/$T" -runs=1 -timeout=10 -rss_limit_mb=2048 "$@" ;;
esac

KIND=$1; T=$(target_of "$KIND"); shift
SECS=${1:-60}; [[ $# -gt 0 ]] && shift
[[ $SECS =~ ^[0-9]+$ ]] || die "SECONDS must be a number, not '$SECS'"

build "$T"
CORPUS=$FUZZ_DIR/corpus/$T
CRASHES=$FUZZ_DIR/crashes/$T
LOGS=$FUZZ_DIR/logs
mkdir -p "$CORPUS" "$CRASHES" "$LOGS"

SEEDS=()
if [[ $KIND == yaml ]]; then
  SEEDS=("$ROOT/stdlib/clusters" "$ROOT/examples/plans" "$ROOT/tests/lit/driver/Inputs")
  DICT=$ROOT/tests/fuzz/yaml.dict
elif [[ $KIND == json || $KIND == safetensors || $KIND == tokens ]]; then
  # Small valid files written by the seed script (regenerated every run, read
  # only for libFuzzer: new inputs go to $CORPUS).
  SEED_DIR=$FUZZ_DIR/seeds/$T
  rm -rf "$SEED_DIR"
  python3 "$ROOT/tests/fuzz/make-seeds.py" "$KIND" "$SEED_DIR" >/dev/null
  SEEDS=("$SEED_DIR")
  DICT=$ROOT/tests/fuzz/$KIND.dict
elif [[ $KIND == mist ]]; then
  SEEDS=("$ROOT/examples" "$ROOT/stdlib/models") # read only: new inputs go to $CORPUS
  DICT=$ROOT/tests/fuzz/mist.dict
else
  DICT=$ROOT/tests/fuzz/ir.dict
  if [[ -x $MISTC ]]; then
    for m in tiny-gpt tiny-llama; do
      "$MISTC" "$ROOT/examples/$m.mist" --emit=costed-ir -o "$CORPUS/seed-$m-costed.mir"
      "$MISTC" "$ROOT/examples/$m.mist" --emit=ir -o "$CORPUS/seed-$m-ir.mir"
      "$MISTC" "$ROOT/examples/$m.mist" --passes=shape-infer --emit=ir -o "$CORPUS/seed-$m-shaped.mir"
    done
  else
    echo "run-fuzz.sh: $MISTC not built; the IR fuzzer starts without seeds" >&2
  fi
fi

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG=$LOGS/$T-$STAMP.log
ARGS=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -dict="$DICT"
      -artifact_prefix="$CRASHES/" -print_final_stats=1)
[[ ${NO_FORK:-0} == 1 ]] || ARGS+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)

before=$(find "$CRASHES" -type f | wc -l)
start=$(date +%s)
cd "$FUZZ_DIR" # fork mode keeps its jobs' folders and logs under $TMPDIR (default /tmp)
set +e
nice -n "$NICE" "$BUILD/bin/$T" "${ARGS[@]}" "$@" "$CORPUS" "${SEEDS[@]}" >"$LOG" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))

# Executions: fork mode's last status line `#N: cov: ...` (the parent's own
# final stats count nothing), else the single process's final stats.
if [[ ${NO_FORK:-0} == 1 ]]; then
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$LOG" | tail -1 | grep -o '[0-9]*$' || true)
else
  execs=$(grep -oE '^#[0-9]+:' "$LOG" | tail -1 | tr -d '#:' || true)
fi
corpus_files=$(find "$CORPUS" -type f | wc -l)
corpus_kb=$(du -sk "$CORPUS" | cut -f1)
after=$(find "$CRASHES" -type f | wc -l)
new=$((after - before))
result=$([[ $new -eq 0 && $rc -eq 0 ]] && echo "no crashes" || echo "$new new crash/timeout/oom/leak files (exit $rc)")
echo "$T: ${elapsed}s, ${execs:-?} execs, corpus $corpus_files files (${corpus_kb} KiB), $result; crashes in $CRASHES/, log $LOG"
}

main "$@"
exit
