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
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The cuDNN frontend's C++ headers (header-only; the bf16 attention on cuDNN,
# stdlib/kernels/attention/AttentionCudnn.cpp) from PyPI's nvidia-cudnn-frontend
# wheel (any Python's: the headers are the same), kept in a cache folder and
# extracted to /opt/cudnn-frontend/include, where cmake/MistCudnn.cmake looks.
# Best effort: without network or pip the build goes on without them, and
# bf16 attention runs the fp32 kernels.
cudnnFrontendVersion=${CUDNN_FRONTEND_VERSION:-1.32.0}
fetch_cudnn_frontend() {
  local dest=/opt/cudnn-frontend cache=${XDG_CACHE_HOME:-$HOME/.cache}/mistc/cudnn-frontend
  local pattern="nvidia_cudnn_frontend-$cudnnFrontendVersion-*.whl" wheel tmp
  [ -f "$dest/include/cudnn_frontend.h" ] && return 0
  mkdir -p "$cache" || return 1
  wheel=$(find "$cache" -name "$pattern" | head -1)
  if [ -z "$wheel" ]; then
    python3 -m pip --version >/dev/null 2>&1 || { echo "setup: no pip for python3"; return 1; }
    # A failed download is tried again a day later, not on every run (run-tests.sh runs this).
    if [ -n "$(find "$cache" -maxdepth 1 -name download-failed -mmin -1440)" ]; then
      echo "setup: the last download failed less than a day ago (remove $cache/download-failed)"
      return 1
    fi
    python3 -m pip download --quiet --no-deps --only-binary=:all: --retries 0 --timeout 15 \
      --dest "$cache" "nvidia-cudnn-frontend==$cudnnFrontendVersion" ||
      { touch "$cache/download-failed"; return 1; }
    rm -f "$cache/download-failed"
    wheel=$(find "$cache" -name "$pattern" | head -1)
    [ -n "$wheel" ] || return 1
  fi
  tmp=$(mktemp -d) || return 1
  python3 - "$wheel" "$tmp" <<'PY' || { rm -rf "$tmp"; return 1; }
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if n.startswith("include/")])
PY
  { $SUDO mkdir -p "$dest" && $SUDO rm -rf "$dest/include" && $SUDO cp -r "$tmp/include" "$dest/"; } ||
    { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  echo "setup: cuDNN frontend $cudnnFrontendVersion headers in $dest/include"
}
fetch_cudnn_frontend || echo "setup: could not fetch nvidia-cudnn-frontend $cudnnFrontendVersion" \
  "(no network?): CMake builds without cuDNN attention, bf16 attention runs the fp32 kernels"
