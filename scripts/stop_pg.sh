#!/usr/bin/env bash
# Stop the throwaway PostgreSQL cluster started by start_pg.sh; WIPE=1 also deletes its directory.
set -euo pipefail
RUN=${PGDIR_ISTHMUS:-/tmp/isthmus-pg}
BIN=""
for d in /usr/lib/postgresql/*/bin; do [ -x "$d/pg_ctl" ] && BIN=$d; done
if [ -z "$BIN" ] || [ ! -d "$RUN/data" ]; then
  echo "no cluster in $RUN" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  runuser -u postgres -- "$BIN/pg_ctl" -D "$RUN/data" -m fast stop >&2 || true
else
  "$BIN/pg_ctl" -D "$RUN/data" -m fast stop >&2 || true
fi
[ "${WIPE:-0}" = 1 ] && rm -rf "$RUN"
exit 0
