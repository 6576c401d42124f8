#!/usr/bin/env bash
# Start a local EC2-compatible server (moto, from the dev extra) on 127.0.0.1 and a free port, in
# its own directory (EC2_RUNDIR, default a new one under /tmp), for trying cloud sites without an
# AWS account. Its instances run nothing: a VM's boot script (user data) never executes there
# (docs/clouds.md). Prints the directory, then the endpoint URL last;
# scripts/stop_ec2_server.sh <directory> stops only this server.
#   out=$(bash scripts/start_ec2_server.sh); endpoint=${out##*$'\n'}
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
RUN=${EC2_RUNDIR:-$(mktemp -d /tmp/isthmus-ec2.XXXXXX)}
mkdir -p "$RUN"
PY="$HERE/.venv/bin/python"
[ -x "$PY" ] || PY=python3
MOTO="$(dirname "$PY")/moto_server"
if [ ! -x "$MOTO" ]; then
  echo "moto_server not found next to $PY: pip install -e '.[dev]' (it brings moto[server,ec2])" >&2
  exit 1
fi
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nohup "$MOTO" -H 127.0.0.1 -p "$PORT" >"$RUN/server.log" 2>&1 &
echo $! >"$RUN/pid"
for _ in $(seq 1 100); do
  if "$PY" -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$PORT/moto-api/', timeout=1)" 2>/dev/null; then
    echo "$RUN"
    echo "http://127.0.0.1:$PORT"
    exit 0
  fi
  if ! kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
    echo "moto_server exited; see $RUN/server.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "moto_server did not answer on port $PORT within 10 s; see $RUN/server.log" >&2
exit 1
