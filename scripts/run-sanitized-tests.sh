#!/usr/bin/env bash
# Builds the unit tests and the tools the lit tests run with AddressSanitizer
# and UndefinedBehaviorSanitizer (GCC, -DMIST_SANITIZE=ON) into build-asan/
# and runs the unit and lit tests and the adversarial corpus (tests/corpus)
# there: ctest -L 'unit|lit|corpus' (not the
# trainers under mpirun, labels trainer and cpu-ranks; not the GPU tests).
# Any ASan report, leak or undefined behaviour fails the test it happens in.
#
#   scripts/run-sanitized-tests.sh
#
# Environment: ASAN_BUILD_DIR (default build-asan/), JOBS (default nproc),
# ASAN_OPTIONS (default detect_leaks=1:allocator_may_return_null=1), UBSAN_OPTIONS (default
# print_stacktrace=1:halt_on_error=1), LSAN_OPTIONS (default: the
# suppressions in scripts/lsan-suppressions.txt). scripts/run-tests.sh runs it
# in CI (CI=true) after the normal tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ASAN_BUILD_DIR:-$root/build-asan}
jobs=${JOBS:-$(nproc)}
[[ $(realpath -m "$build") != "$root/build" ]] || { echo "run-sanitized-tests: refusing to use build/" >&2; exit 2; }

# allocator_may_return_null: an impossible allocation returns null, as glibc's
# does, instead of aborting (StageMemoryDeathTest expects mistrt's "out of memory").
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan-suppressions.txt:print_suppressions=0}

# The executables the unit and lit tests run. A test program missing here
# shows up as <target>_NOT_BUILT below and fails the run.
targets=(
  mistUnitTests mistrtCheckpointTests mistrtDataTests mistrtRankLayoutTest
  mistrtTrainerPartsTests mistrtPlacementTest mist-safetensors-tool # label unit
  mist-token-tool mist-data                     # run by the corpus
  mistc mist-yaml-check mist-profile-cpu        # run by the lit tests
)

# -O1 -g1: a third of -O2 -g's compile time with line numbers in the reports;
# asserts on (no NDEBUG). Warnings are the normal build's business (MIST_WERROR).
# CI (CI=true) drops -g1 for time: reports then name functions, not lines.
debug=-g1
if [[ ${CI:-false} == true ]]; then debug=-g0; fi
cmake -S "$root" -B "$build" -G Ninja -DMIST_SANITIZE=ON -DMIST_WERROR=OFF \
  -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_C_FLAGS_SANITIZE="-O1 $debug" -DCMAKE_CXX_FLAGS_SANITIZE="-O1 $debug" >/dev/null
# gtest_discover_tests runs each test binary at build time: with the
# sanitizer options above, exported.
build_start=$SECONDS
cmake --build "$build" --target "${targets[@]}" -j "$jobs"
echo "run-sanitized-tests: build took $((SECONDS - build_start)) s" >&2

cd "$build"
if not_built=$(ctest -N | grep -o '[A-Za-z0-9_-]*_NOT_BUILT'); then
  echo "run-sanitized-tests: test programs not built (add them to targets): $not_built" >&2
  exit 1
fi
ctest --output-on-failure -j "$jobs" -L 'unit|lit|corpus'
