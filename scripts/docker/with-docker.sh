#!/usr/bin/env bash
# Runs a command with a Docker engine: installs Debian's docker.io when dockerd is missing
# (apt-get, as root), starts dockerd with the vfs storage driver when none answers, and stops
# the daemon it started when the command ends. The command's exit code is returned.
#
#   scripts/docker/with-docker.sh <command...>
set -euo pipefail

if ! command -v dockerd >/dev/null 2>&1; then
  echo "[docker] installing docker.io with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

started=""
if ! docker info >/dev/null 2>&1; then
  run_dir=$(mktemp -d)
  echo "[docker] starting dockerd (vfs storage; log $run_dir/dockerd.log)"
  dockerd --storage-driver=vfs --data-root=/var/lib/docker-pgqueue --exec-root="$run_dir/exec" \
    --pidfile="$run_dir/dockerd.pid" -H unix:///var/run/docker.sock >"$run_dir/dockerd.log" 2>&1 &
  started=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "[docker] dockerd did not answer in 30 s:"; tail -20 "$run_dir/dockerd.log"; exit 1; }
fi
stop() {
  if [ -n "$started" ]; then
    echo "[docker] stopping the dockerd this script started"
    kill "$started" 2>/dev/null || true
    wait "$started" 2>/dev/null || true
  fi
}
trap stop EXIT

set +e
"$@"
code=$?
set -e
# A failed command's cause can be the engine's (a network or storage error): show its log's end.
if [ "$code" -ne 0 ] && [ -n "$started" ]; then
  echo "[docker] the command failed (exit $code); the last warnings and errors in $run_dir/dockerd.log:"
  grep -E 'level=(warning|error|fatal)' "$run_dir/dockerd.log" | tail -30 || true
  df -h /var/lib/docker-pgqueue || true
fi
exit $code
