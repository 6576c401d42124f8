#!/usr/bin/env bash
# Stop the Slurm that start_slurm.sh started in the run directory given (or SLURM_RUNDIR): its
# slurmd, slurmctld and munged, found by their pid files there, nothing else. WIPE=1 also
# deletes the directory.
#   bash scripts/stop_slurm.sh "$(dirname "$ISTHMUS_TEST_SLURM")"
set -euo pipefail
RUN=${1:-${SLURM_RUNDIR:-}}
if [ -z "$RUN" ] || [ ! -f "$RUN/slurm.conf" ]; then
  echo "no Slurm of start_slurm.sh in '${RUN}'" >&2
  exit 0
fi
stop_pid_file() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  echo "$pid"
}
pids=()
for f in "$RUN"/slurmd-*.pid "$RUN/slurmctld.pid"; do
  p=$(stop_pid_file "$f")
  [ -n "$p" ] && pids+=("$p")
done
for _ in $(seq 1 50); do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  sleep 0.2
done
for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
p=$(stop_pid_file "$RUN/munge/munged.pid")
[ "${WIPE:-0}" = 1 ] && { sleep 0.3; rm -rf "$RUN"; }
exit 0
