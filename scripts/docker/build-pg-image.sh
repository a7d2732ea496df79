#!/usr/bin/env bash
# Builds a PostgreSQL image for Testcontainers without any image registry: a root folder made
# from this machine's own PostgreSQL files (the server binaries, the libraries `ldd` names, the
# share folder and time zones), a shell and a few tools for Testcontainers' readiness checks,
# imported with `docker import`. The entrypoint honours POSTGRES_USER, POSTGRES_PASSWORD and
# POSTGRES_DB like the official image: local connections trust, host connections use scram.
#
#   scripts/docker/build-pg-image.sh [tag]     default tag: nestjs-pg-queue/postgres:<major>-local
#
# Prints the tag. Skips the build when an image with that tag and the same inputs exists.
set -euo pipefail

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PG_BIN" ] || { echo "build-pg-image: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }
PG_HOME=$(dirname "$PG_BIN")
MAJOR=$(basename "$PG_HOME")
TAG=${1:-nestjs-pg-queue/postgres:${MAJOR}-local}
HERE=$(cd "$(dirname "$0")" && pwd)

# The inputs' fingerprint: the server binary and the entrypoint. Same fingerprint, no rebuild.
FINGERPRINT=$(cat "$PG_BIN/postgres" "$HERE/pg-entrypoint.sh" "$0" | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "fingerprint" }}' "$TAG" 2>/dev/null || true)" = "$FINGERPRINT" ]; then
  echo "$TAG"
  exit 0
fi

ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
chmod 755 "$ROOT" # mktemp makes it 700: the postgres user could not read its own libraries
mkdir -p "$ROOT"/usr/{bin,sbin,lib,lib64,share,local/bin} "$ROOT"/{etc,tmp,var/lib/postgresql,var/run/postgresql}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$ROOT/$d"; done
chmod 1777 "$ROOT/tmp"

copy() { # copies a file to the same path under $ROOT, following links (merged /usr: /lib -> /usr/lib)
  local src=$1 dst
  dst="$ROOT$(printf '%s' "$src" | sed -E 's#^/(bin|sbin|lib|lib64)/#/usr/\1/#')"
  [ -e "$dst" ] && return 0
  mkdir -p "$(dirname "$dst")"
  cp -L "$src" "$dst"
}

TOOLS="sh bash cat grep awk setpriv mkdir chown chmod rm"
BINARIES=$(for t in $TOOLS; do command -v "$t"; done; ls "$PG_BIN"/*)
for b in $BINARIES; do
  copy "$(readlink -f "$b")"
  case "$b" in "$PG_BIN"/*) ;; *) cp -L "$b" "$ROOT/usr/bin/$(basename "$b")" ;; esac
  ldd "$b" 2>/dev/null | grep -oE '/[^ ]+' | while read -r lib; do copy "$lib"; done
done
cp -a "$PG_HOME" "$ROOT/usr/lib/postgresql/" 2>/dev/null || true
mkdir -p "$ROOT/usr/share/postgresql"
cp -a "/usr/share/postgresql/$MAJOR" "$ROOT/usr/share/postgresql/"
cp -a /usr/share/zoneinfo "$ROOT/usr/share/" # Debian's PostgreSQL reads the system time zones
for b in "$PG_BIN"/*; do ln -sf "/usr/lib/postgresql/$MAJOR/bin/$(basename "$b")" "$ROOT/usr/local/bin/$(basename "$b")"; done
cp "$HERE/pg-entrypoint.sh" "$ROOT/usr/local/bin/docker-entrypoint.sh"
chmod 755 "$ROOT/usr/local/bin/docker-entrypoint.sh"
printf 'root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:PostgreSQL:/var/lib/postgresql:/bin/sh\n' >"$ROOT/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\n' >"$ROOT/etc/group"
chmod -R a+rX "$ROOT/usr" "$ROOT/etc"

tar -C "$ROOT" -c . | docker import \
  -c 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data' \
  -c 'EXPOSE 5432' \
  -c "LABEL fingerprint=$FINGERPRINT" \
  - "$TAG" >/dev/null
echo "$TAG"
