#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster on 127.0.0.1:55432 (no systemd needed) and print its DSN.
# Installs postgresql with apt-get only if it is missing. Runs the server as user postgres
# (initdb and postgres refuse root). PGDIR_ISTHMUS (default /tmp/isthmus-pg) holds it, PGPORT_ISTHMUS (default 55432) is its port; FRESH=1 wipes it first.
# Usage: export ISTHMUS_TEST_PG=$(scripts/start_pg.sh)
set -euo pipefail
RUN=${PGDIR_ISTHMUS:-/tmp/isthmus-pg}
PORT=${PGPORT_ISTHMUS:-55432}
DSN="postgresql://postgres@127.0.0.1:${PORT}/postgres"

find_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}

if ! BIN=$(find_bin); then
  echo "installing postgresql..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  BIN=$(find_bin)
fi

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

if [ "${FRESH:-0}" = 1 ] && [ -d "$RUN" ]; then
  as_pg "$BIN/pg_ctl" -D "$RUN/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$RUN"
fi
mkdir -p "$RUN"
[ "$(id -u)" = 0 ] && chown postgres:postgres "$RUN"

if [ ! -f "$RUN/data/PG_VERSION" ]; then
  as_pg "$BIN/initdb" -D "$RUN/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 >"$RUN/initdb.log" 2>&1
fi

if as_pg "$BIN/pg_ctl" -D "$RUN/data" status >/dev/null 2>&1; then
  echo "postgresql already running in $RUN" >&2
else
  as_pg "$BIN/pg_ctl" -D "$RUN/data" -l "$RUN/server.log" -w -o \
    "-c listen_addresses=127.0.0.1 -p $PORT -k $RUN -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >&2
fi
echo "$DSN"
