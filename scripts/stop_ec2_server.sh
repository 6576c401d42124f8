#!/usr/bin/env bash
# Stop the EC2-compatible server scripts/start_ec2_server.sh started in the directory given
# (only that process, by its pid file); WIPE=1 also removes the directory.
set -euo pipefail
RUN=${1:?usage: stop_ec2_server.sh DIRECTORY}
if [ -f "$RUN/pid" ]; then
  PID=$(cat "$RUN/pid")
  if kill -0 "$PID" 2>/dev/null; then
    kill "$PID"
    for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$RUN/pid"
fi
[ -z "${WIPE:-}" ] || rm -rf "$RUN"
