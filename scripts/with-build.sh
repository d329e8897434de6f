# Sourced by the scripts that run trainsim (bench/run.sh, scripts/update-doc-plots.sh): builds
# it if needed, sets $root and $build, makes a scratch directory $out removed on exit, and
# moves to the project root.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TRAINSIM_BUILD_DIR:-$root/build}"
bash "$root/scripts/bootstrap.sh" build > /dev/null
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$root"
