#!/usr/bin/env bash
# Unregister a user of the Grid Engine of scripts/start_gridengine.sh (the id it printed) and,
# when no user is left, stop the daemons those scripts started: sge_execd, then sge_qmaster
# (about 10 s to exit). Daemons started by someone else are never stopped. Jobs the user's
# tests left are theirs to delete (qdel), not this script's.
#   bash scripts/stop_gridengine.sh "$sge_user"
set -euo pipefail
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
STATE=/tmp/isthmus-gridengine
user=${1:-}
[ -d "$STATE" ] || exit 0
exec 9>>"$STATE/lock"
flock 9
if [ -n "$user" ] && [ -f "$STATE/users" ]; then
  grep -vxF "$user" "$STATE/users" >"$STATE/users.new" || true
  mv "$STATE/users.new" "$STATE/users"
fi
if [ -f "$STATE/users" ]; then  # drop users whose process is gone (killed without stopping)
  while read -r u; do
    kill -0 "${u%%-*}" 2>/dev/null && echo "$u"
  done <"$STATE/users" >"$STATE/users.new" || true
  mv "$STATE/users.new" "$STATE/users"
fi
if [ -s "$STATE/users" ]; then
  exit 0  # someone still uses it
fi
stop() {  # stop PIDFILE MARKER SECONDS
  local pid
  [ -f "$2" ] || return 0
  rm -f "$2"
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq $(($3 * 5))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -9 "$pid" 2>/dev/null || true
}
stop /var/spool/gridengine/execd/localhost/execd.pid "$STATE/started-execd" 10
stop /var/spool/gridengine/qmaster/qmaster.pid "$STATE/started-qmaster" 20
