#!/usr/bin/env bash
# All tests on a fresh machine: install dependencies, build, run CTest
# (GPU tests, when there are any, report "skipped" without a GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -LE gpu
