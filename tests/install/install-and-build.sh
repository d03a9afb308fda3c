#!/usr/bin/env bash
# An installed mistc needs nothing of its source or build tree (issue 48):
# installs BUILD to a temporary prefix, then, with the source and build trees
# hidden (a mount namespace lays an empty tmpfs over each, as if they were
# moved away), plans an installed example with the installed mistc, builds
# its train.cu with the header's line and with find_package(mistrt), and
# trains two steps on two CPU ranks. Where no mount namespace can be made
# (not root), the same runs with the trees in place, and says so.
#   install-and-build.sh SOURCE BUILD
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: install-and-build.sh SOURCE BUILD" >&2; exit 2; }
source=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/mist-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
prefix=$work/prefix
flags=$("$prefix/bin/mistc" --print-build-flags)
for tree in "$source" "$build"; do
  [[ $flags != *"$tree"* ]] || { echo "the installed mistc's build flags name $tree: $flags" >&2; exit 1; }
done
cp "$source/tests/trainer/tiny-gpt-2ranks.yaml" "$work/plan.yaml"
cat >"$work/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(installed_trainer CXX)
find_package(mistrt REQUIRED)
add_executable(train train.cu)
set_source_files_properties(train.cu PROPERTIES LANGUAGE CXX)
target_link_libraries(train PRIVATE mistrt::cpu-trainer)
CMAKE
cat >"$work/steps.sh" <<'STEPS'
set -euo pipefail
cd "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PATH="$WORK/prefix/bin:$PATH"
mistc prefix/share/mist/examples/tiny-gpt.mist --cluster a100-40g --plan plan.yaml -o train.cu 2>/dev/null
line=$(grep -m1 '^//   mpicxx' train.cu | sed 's|^//   ||')
eval "$line"
mpirun --oversubscribe -np 2 ./train --steps 2 </dev/null | awk '/^step/ {print $2, $4, $7}' > header-build.txt
cmake -S . -B cmake-build -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" >/dev/null
cmake --build cmake-build >/dev/null
mpirun --oversubscribe -np 2 cmake-build/train --steps 2 </dev/null | awk '/^step/ {print $2, $4, $7}' > package-build.txt
[[ $(wc -l < header-build.txt) == 2 ]] && diff header-build.txt package-build.txt >/dev/null ||
  { echo "the two builds of the installed trainer did not train alike"; cat header-build.txt package-build.txt; exit 1; }
cat header-build.txt
STEPS
export WORK=$work
if unshare -m --propagation private true 2>/dev/null; then
  # The build tree may lie inside the source tree: hide it first.
  unshare -m --propagation private bash -c "mount -t tmpfs none '$build' && mount -t tmpfs none '$source' && bash '$work/steps.sh'"
  echo "install-and-build.sh: trained from $prefix with $source and $build hidden"
else
  bash "$work/steps.sh"
  echo "install-and-build.sh: trained from $prefix (no mount namespace here: the trees stayed in place, unused by the build flags)"
fi
