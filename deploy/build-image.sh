#!/usr/bin/env bash
# Builds perld's container image from Debian packages only (no registry to
# pull from): mmdebstrap makes a minbase Debian 12 root, imported as the base
# of both stages of deploy/Dockerfile; podman builds the image, starts it,
# waits for its health, reports the image size, stops it with SIGTERM and
# checks a clean exit. Needs root, podman (runc), mmdebstrap and a Debian
# mirror: apt-get install podman runc mmdebstrap (not in install-deps.sh).
#   bash deploy/build-image.sh [TAG]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tag="${1:-perld:local}"
# Sandboxed hosts (a VM with hybrid cgroups, capped rlimits) need runc and
# limits within the host's: harmless elsewhere.
podman=(podman)
if command -v runc >/dev/null; then podman+=(--runtime runc); fi
limits=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
base=localhost/debian-minbase:12
if ! podman image exists "$base"; then
  echo "== base image from Debian packages (mmdebstrap --variant=minbase bookworm)"
  mmdebstrap --variant=minbase --include=ca-certificates bookworm - | podman import - "$base"
fi
echo "== podman build -f deploy/Dockerfile -t $tag"
started=$SECONDS
"${podman[@]}" build "${limits[@]}" --format docker --network host --build-arg BASE="$base" --build-arg RUNTIME_BASE="$base" \
  -f deploy/Dockerfile -t "$tag" .
echo "built in $((SECONDS - started)) s"
podman image inspect "$tag" --format 'image size: {{.Size}} bytes'
podman image inspect "$base" --format 'base (Debian 12 minbase) size: {{.Size}} bytes'

echo "== start, health, SIGTERM"
name="perld-image-check-$$"
podman rm -f "$name" >/dev/null 2>&1 || true
started_ns=$(date +%s%N)
# Its own network namespace with no interfaces but loopback: the image's
# default configuration (every interface, ports 9717/9719) stays private.
"${podman[@]}" run -d "${limits[@]}" --name "$name" --network none "$tag" >/dev/null
healthy=""
for _ in $(seq 1 100); do
  # The image's own HEALTHCHECK (perlctl runs), as podman runs it.
  if "${podman[@]}" healthcheck run "$name" >/dev/null 2>&1; then healthy=yes; break; fi
  sleep 0.1
done
[ -n "$healthy" ] || { podman logs "$name"; podman rm -f "$name"; echo "FAILED: no health"; exit 1; }
echo "HEALTHCHECK healthy $((($(date +%s%N) - started_ns) / 1000000)) ms after podman run began"
"${podman[@]}" exec "$name" /usr/bin/perlctl --target 127.0.0.1:9717 bench -writers 1 -records 100000 \
  --name image-check --wait >/dev/null
"${podman[@]}" exec "$name" /usr/bin/perlctl --target 127.0.0.1:9717 --json show image-check \
  | grep -q '"records":100000' && echo "a 100000-record bench run inside the container: exact"
"${podman[@]}" exec "$name" id -u | grep -qx 10001 && echo "runs as uid 10001 (perld), not root"
"${podman[@]}" stop -t 30 "$name" >/dev/null
code="$(podman inspect "$name" --format '{{.State.ExitCode}}')"
podman logs "$name" 2>&1 | grep -q "stopped" && echo "SIGTERM: daemon stopped cleanly, exit $code"
podman rm "$name" >/dev/null
[ "$code" = 0 ] || { echo "FAILED: exit code $code"; exit 1; }
echo PASSED
