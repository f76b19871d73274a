#!/usr/bin/env bash
# The README's main-job command: installs what perld needs (Debian 12), builds
# the release `perld`, and runs the main job: an exact PerlBench run of 20
# million records through the default (intrusive MPSC) timestamp pipeline.
# Extra arguments replace the default bench options, e.g.
#   scripts/run-main.sh -writers 4 -size 1024 -seconds 30 -time ns
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build/release" -j "$(nproc)" --target perld
if [ $# -eq 0 ]; then
  set -- -writers 1 -size 1024 -records 20000000 -time ns
fi
exec "$root/build/release/daemon/bench/perld" bench "$@"
