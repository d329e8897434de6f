#!/usr/bin/env bash
# Sets up a Debian bookworm machine for trainsim, builds it, and then either runs
# the default scenario (`run`) or the whole test suite (`test`). Idempotent: it
# installs only missing packages and rebuilds only what changed.
#
#   bash scripts/bootstrap.sh run     # install, build, simulate scenarios/default.ini
#   bash scripts/bootstrap.sh test    # install (Chromium too), build, run every test with ctest:
#                                     # normal build, sanitizer build, and a short run of every fuzz target
set -euo pipefail

mode="${1:-run}"
case "$mode" in
  run|test|build) ;;
  *) echo "usage: bash scripts/bootstrap.sh run|test|build" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TRAINSIM_BUILD_DIR:-$root/build}"
packages=(g++ make cmake pkg-config libsimgrid-dev libboost-graph-dev libboost-program-options-dev
          libspdlog-dev doctest-dev nlohmann-json3-dev libjemalloc-dev)
# The tests render report.html in a headless browser and start a one-node Slurm cluster (its own
# munged) for docs/slurm-sweep.sbatch; running trainsim needs neither.
if [ "$mode" = test ]; then
  packages+=(chromium slurmctld slurmd slurm-client munge)
fi
bash "$root/scripts/install-packages.sh" "${packages[@]}"

jobs="$(nproc 2>/dev/null || echo 2)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build" -j "$jobs"

case "$mode" in
  run) cd "$root" && "$build/trainsim" run scenarios/default.ini ;;
  test)
    # The normal build, every fuzz target for a short fixed budget, then the whole suite again
    # under AddressSanitizer and UndefinedBehaviorSanitizer (any report fails).
    ctest --test-dir "$build" --output-on-failure -j "$jobs"
    bash "$root/scripts/fuzz.sh" "${TRAINSIM_FUZZ_SECONDS:-30}"
    sanitized="${TRAINSIM_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
    if [ ! -f "$sanitized/CMakeCache.txt" ]; then
      cmake -S "$root" -B "$sanitized" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINSIM_SANITIZE=address,undefined
    fi
    cmake --build "$sanitized" -j "$jobs"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$sanitized" --output-on-failure -j "$jobs"
    ;;
  build) ;;
esac
