#!/usr/bin/env bash
# Rewrites the README's checked examples (a "$ command" in a fenced block, or a
# "<!-- $ command -->" line before a block) with what the current trainsim prints; the e2e test
# "every README example prints what the README shows" compares them. Then regenerates the plots.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/with-build.sh"
"$build/tests/update_readme" "$root" "$build/trainsim"
bash "$root/scripts/update-doc-plots.sh"
