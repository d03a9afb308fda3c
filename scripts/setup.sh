#!/usr/bin/env bash
# Installs the Debian packages mistc builds and tests with. Safe to run twice.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config python3
          llvm-14-dev llvm-14-tools libginac-dev libglpk-dev libfmt-dev libyaml-cpp-dev
          libgtest-dev libopenmpi-dev openmpi-bin
          libopenblas-openmp-dev # the CPU trainer's GEMMs (stdlib/kernels/cpu/Gemm.cpp)
          iproute2 # tests/trainer/two-hosts.sh makes hosts with network namespaces
          clang-format-14) # scripts/check-format.sh (CTest: format-check)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
