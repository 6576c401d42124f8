#!/usr/bin/env bash
# Undo scripts/start_sshd.sh for the run directory given: stop its sshd (and every session
# process of its account) and relays, remove its account, veth pair and network namespace, and
# delete the directory. Only what that run made, found through the files it wrote.
set -euo pipefail
RUN=${1:?usage: stop_sshd.sh RUNDIR}
[ -f "$RUN/env" ] || { echo "no sshd of start_sshd.sh in '$RUN'" >&2; exit 0; }
# shellcheck disable=SC1091
. "$RUN/env"
for f in "$RUN/fwd-ns.pid" "$RUN/fwd-host.pid" "$RUN/sshd.pid"; do
  [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true
done
if [ -f "$RUN/user" ] && id "$SSH_USER" >/dev/null 2>&1; then
  pkill -KILL -u "$SSH_USER" 2>/dev/null || true  # the account's own sessions only
  sleep 0.2
  userdel "$SSH_USER" 2>/dev/null || true
fi
ip link del "$SSH_HOST_IF" 2>/dev/null || true
ip netns del "$SSH_NS" 2>/dev/null || true
rm -rf "$RUN"
