#!/usr/bin/env bash
# All tests on a fresh machine: install dependencies, build, run CTest
# (GPU tests, when there are any, report "skipped" without a GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Each phase's wall time, for keeping CI's total in view (stderr).
phase_start=$SECONDS
phase_done() {
  echo "run-tests: $1 took $((SECONDS - phase_start)) s (total $SECONDS s)" >&2
  phase_start=$SECONDS
}
"$root/scripts/setup.sh"
phase_done setup
# CI builds without debug info (the same -O2, asserts off): a quarter less
# compile time on a clean clone.
if [[ ${CI:-false} == true ]]; then export DEBUG_INFO=${DEBUG_INFO:-0}; fi
# With the sanitized build (CI), the unit and lit tests and the adversarial
# corpus run there only: the normal build leaves the unit tests out.
sanitized=false
[[ ${MIST_SANITIZED_TESTS:-${CI:-false}} =~ ^(1|true)$ ]] && sanitized=true
if $sanitized; then export MIST_UNIT_TESTS=OFF; else export MIST_UNIT_TESTS=ON; fi
"$root/scripts/build.sh"
phase_done build
cd "${BUILD_DIR:-$root/build}"
# Label long: the whole bf16 equivalence suite (~10 min on 2 cores), run by
# hand (ctest -L long) and recorded in bench/results/bf16-equivalence.txt.
exclude='gpu|long'
$sanitized && exclude='gpu|long|corpus|unit|lit'
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -LE "$exclude"
phase_done tests
# In CI (CI=true), or with MIST_SANITIZED_TESTS=1: the unit and lit tests and
# the corpus, built with ASan and UBSan in build-asan/ (MIST_SANITIZED_TESTS=0
# skips them, and the normal build runs them instead).
if $sanitized; then
  "$root/scripts/run-sanitized-tests.sh"
  phase_done "sanitized build and tests"
fi
