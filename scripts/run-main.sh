#!/usr/bin/env bash
# The README's main-job command: installs what perld needs (Debian 12), builds
# the release `perld` and `perlctl`, starts the perld daemon (loopback, free
# ports, a temporary state directory), runs an exact PerlBench run of 20
# million records through `perlctl bench --wait` (every interval window as it
# closes, then the total), shows the run, and stops the daemon with SIGTERM.
# Extra arguments replace the default bench options, e.g.
#   scripts/run-main.sh -writers 4 -size 1024 -seconds 30 -time ns
# Exit status: perlctl's (0 only when the run finished with every record).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build/release" -j "$(nproc)" --target perld perlctl
perld="$root/build/release/daemon/bench/perld"
perlctl="$root/build/release/client/perlctl/perlctl"
if [ $# -eq 0 ]; then
  set -- -writers 1 -size 1024 -records 20000000 -time ns
fi

work="$(mktemp -d)"
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$perld" --grpc-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --state-dir "$work/state" \
  >"$work/perld.out" 2>"$work/perld.log" &
daemon_pid=$!
target=""
for _ in $(seq 1 300); do  # up to 30 s for the listeners
  target="$(sed -n 's/^perld: gRPC listening on //p' "$work/perld.out")"
  [ -n "$target" ] && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$target" ]; then
  echo "run-main: perld did not start:" >&2
  cat "$work/perld.log" >&2
  exit 1
fi
cat "$work/perld.out"

rc=0
"$perlctl" --target "$target" bench "$@" --name main-job --wait || rc=$?
"$perlctl" --target "$target" show main-job || true

kill -TERM "$daemon_pid"
daemon_rc=0
wait "$daemon_pid" || daemon_rc=$?
daemon_pid=""
echo "perld log:"
cat "$work/perld.log"
echo "perld exited with status $daemon_rc"
[ "$daemon_rc" -eq 0 ] || rc=1
exit "$rc"
