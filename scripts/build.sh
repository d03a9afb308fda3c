#!/usr/bin/env bash
# Configures and builds mistc into build/ (BUILD_DIR overrides; BUILD_TYPE
# defaults to RelWithDebInfo, DEBUG_INFO=0 drops its -g, MIST_UNIT_TESTS=OFF
# leaves out the compiler's unit tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
flags=()
if [[ ${DEBUG_INFO:-1} == 0 ]]; then
  flags=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG"
    -DCMAKE_CUDA_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG")
fi
# CI compiles the CUDA code for one architecture (H100's): the build proves it
# compiles; GPU hosts build both (bench/gpu/run-all.sh configures its own).
if [[ ${CI:-false} == true ]]; then flags+=(-DMIST_CUDA_ARCHITECTURES=90a); fi
# MIST_UNIT_TESTS=OFF|ON: leave out (or build) the compiler's unit tests.
if [[ -n ${MIST_UNIT_TESTS:-} ]]; then flags+=(-DMIST_UNIT_TESTS=$MIST_UNIT_TESTS); fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "${flags[@]}" >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}"
