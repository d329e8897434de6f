#!/usr/bin/env bash
# Sets up a Debian bookworm machine for trainsim, builds it, and then either runs
# the default scenario (`run`) or the whole test suite (`test`). Idempotent: it
# installs only missing packages and rebuilds only what changed.
#
#   bash scripts/bootstrap.sh run     # install, build, simulate scenarios/default.ini
#   bash scripts/bootstrap.sh test    # install, build, run every test with ctest
set -euo pipefail

mode="${1:-run}"
case "$mode" in
  run|test|build) ;;
  *) echo "usage: bash scripts/bootstrap.sh run|test|build" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TRAINSIM_BUILD_DIR:-$root/build}"
packages=(g++ make cmake pkg-config libsimgrid-dev libboost-graph-dev libboost-program-options-dev
          libspdlog-dev doctest-dev nlohmann-json3-dev)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "bootstrap: run as root or install sudo" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

jobs="$(nproc 2>/dev/null || echo 2)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" -j "$jobs"

case "$mode" in
  run) cd "$root" && "$build/trainsim" run scenarios/default.ini ;;
  test) ctest --test-dir "$build" --output-on-failure -j "$jobs" ;;
  build) ;;
esac
