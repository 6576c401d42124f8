#!/usr/bin/env bash
# Start Grid Engine (Debian's Son of Grid Engine 8.1.9) on this machine: one sge_qmaster and one
# sge_execd (Grid Engine allows one exec host per machine, ../shared/lrm/NOTES.md §2), a queue
# all.q of SLOTS (default 4) slots on it and a parallel environment smp ($pe_slots) for
# multi-slot jobs. Installs the Debian packages unattended if they are missing (root).
#
# Grid Engine's ports (6444/6445) and SGE_ROOT are global on a machine, so two users (two test
# runs) share one instance: each start registers a user under a lock and prints its user id
# last; scripts/stop_gridengine.sh <that id> unregisters it and stops the daemons only when it
# was the last user and these scripts started them (daemons someone else started are left).
#   sge_user=$(OWNER_PID=$$ bash scripts/start_gridengine.sh | tail -1)
#   export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
set -euo pipefail
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
SLOTS=${SLOTS:-4}
STATE=/tmp/isthmus-gridengine
mkdir -p "$STATE"
exec 9>>"$STATE/lock"
flock 9

if ! command -v qsub >/dev/null || [ ! -x /usr/sbin/sge_qmaster ] || [ ! -x /usr/sbin/sge_execd ]; then
  echo "installing gridengine-master, gridengine-exec and gridengine-client..." >&2
  for pkg in gridengine-common gridengine-client; do
    debconf-set-selections <<EOF
$pkg shared/gridengineconfig boolean true
$pkg shared/gridenginecell string default
$pkg shared/gridenginemaster string localhost
EOF
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends gridengine-master gridengine-exec gridengine-client >&2
fi

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
QMASTER_PID=/var/spool/gridengine/qmaster/qmaster.pid
EXECD_PID=/var/spool/gridengine/execd/localhost/execd.pid
COMMON=$SGE_ROOT/$SGE_CELL/common

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2
  shift 2
  for _ in $(seq $((limit * 5))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "Grid Engine: $what did not happen within ${limit} s" >&2
  exit 1
}

# qconf edits through files: EDITOR-driven commands are interactive
edit_conf() {  # edit_conf SHOW-ARGS MODIFY-FLAG NAME SED-SCRIPT
  local f
  f=$(mktemp -d)/$3
  qconf $1 >"$f"
  sed -i -e "$4" "$f"
  qconf "$2" "$f" >&2
  rm -rf "$(dirname "$f")"
}

if ! alive "$QMASTER_PID"; then
  # this machine's name resolves to 127.0.0.1 whose reverse is localhost: call everything localhost
  echo "localhost $(hostname)" >"$COMMON/host_aliases"
  echo localhost >"$COMMON/act_qmaster"
  /usr/sbin/sge_qmaster
  wait_for 30 "sge_qmaster answering" qconf -sh
  touch "$STATE/started-qmaster"
fi

# this machine submits jobs: the packages' set-up does not always register it (a fresh machine
# named otherwise than localhost was left with no submit host)
qconf -ss 2>/dev/null | grep -qx localhost || qconf -as localhost >&2

# configuration (idempotent): root may run jobs, fast scheduling, no load-based blocking
edit_conf "-sconf global" -Mconf global 's/^min_uid .*/min_uid 0/; s/^min_gid .*/min_gid 0/;
  s/^reporting_params .*/reporting_params accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00/;
  /^ *flush_time=/d; /^ *sharelog=/d'
edit_conf -ssconf -Msconf sched 's/^schedule_interval .*/schedule_interval 0:0:1/;
  s/^job_load_adjustments .*/job_load_adjustments NONE/; s/^flush_submit_sec .*/flush_submit_sec 1/;
  s/^flush_finish_sec .*/flush_finish_sec 1/'
# new objects through qconf's editor: a sed script stands in for it (their files need every
# attribute, which only qconf's own template has)
add_with_editor() {  # add_with_editor QCONF-ADD-FLAG NAME SED-SCRIPT
  local ed
  ed=$(mktemp)
  printf '#!/bin/sh\nsed -i -e "%s" "$1"\n' "$3" >"$ed"
  chmod +x "$ed"
  EDITOR=$ed qconf "$1" "$2" >&2
  rm -f "$ed"
}
if ! qconf -spl | grep -qx smp; then
  add_with_editor -ap smp 's/^slots .*/slots 9999/; s/^allocation_rule .*/allocation_rule \$pe_slots/'
fi
if ! qconf -sql 2>/dev/null | grep -qx all.q; then
  add_with_editor -aq all.q "s/^hostlist .*/hostlist localhost/; s/^slots .*/slots $SLOTS/; s/^pe_list .*/pe_list smp/;
    s|^shell .*|shell /bin/sh|; s/^load_thresholds .*/load_thresholds NONE/"
fi

if ! alive "$EXECD_PID"; then
  /usr/sbin/sge_execd
  touch "$STATE/started-execd"
fi
# the queue instance is usable once the execd reports (no "u"nknown, "E"rror or "d"isabled state)
wait_for 60 "the exec host reporting" sh -c \
  'qstat -f -q all.q | awk '\''$1 ~ /^all.q@/ {print $6}'\'' | grep -qv . && qstat -f -q all.q | grep -q "^all.q@"'
qmod -cq all.q >/dev/null 2>&1 || true  # a queue left in error by an earlier run

# the id starts with the owner's pid (OWNER_PID, default the caller): a user whose process died
# without unregistering (a killed test run) is dropped by the next stop
user="${OWNER_PID:-$PPID}-$(date +%s%N)"
echo "$user" >>"$STATE/users"
echo "Grid Engine up: queue all.q on localhost, SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL" >&2
echo "$user"
