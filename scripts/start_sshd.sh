#!/usr/bin/env bash
# Start a test login host: a network namespace joined to this host by a veth pair (names and a
# /30 subnet unique to this run), an sshd inside it listening only on the namespace's address
# with a host key made for this run, and an unprivileged account (useradd) whose authorized key
# is made here too. All state lives in SSHD_RUNDIR (default: a new directory under /tmp); the
# last line printed is that directory, whose file `env` holds SSH_DEST, SSH_PORT, SSH_KEY,
# KNOWN_HOSTS (filled by ssh-keyscan and checked against the host key), SSH_USER, SSH_ADDR, SSH_NS.
# scripts/stop_sshd.sh RUNDIR removes exactly what this made. Root only.
# Installs Debian's openssh-server with apt-get if sshd is missing (nothing is started by apt).
# FORWARD_SLURM=<slurm.conf>: commands inside the namespace reach that Slurm's controller on
# 127.0.0.1:<SlurmctldPort> through a relay (scripts/netns_forward.py): the namespace itself
# has no route anywhere but its veth peer.
#   run=$(bash scripts/start_sshd.sh | tail -1); . "$run/env"; ... ; bash scripts/stop_sshd.sh "$run"
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "start_sshd.sh needs root (network namespace, useradd)" >&2; exit 1; }
RUN=${SSHD_RUNDIR:-$(mktemp -d /tmp/isthmus-sshd.XXXXXX)}
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)
chmod 755 "$RUN"
HERE=$(cd "$(dirname "$0")" && pwd)

if [ ! -x /usr/sbin/sshd ]; then
  echo "installing openssh-server..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends openssh-server >&2
fi
mkdir -p /run/sshd && chmod 755 /run/sshd  # sshd's privilege separation directory

ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
NS="isth-ssh-$ID"
HOST_IF="ish$ID"
NS_IF="isn$ID"
SSH_USER="isth$ID"
# a /30 in 10.200.0.0/13 not already on this host
for _ in $(seq 1 50); do
  n=$(( $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 16384 ))
  a=$(( 200 + n / 2048 )); b=$(( (n / 8) % 256 )); c=$(( (n % 8) * 32 + 4 ))
  HOST_ADDR="10.$a.$b.$((c + 1))"; SSH_ADDR="10.$a.$b.$((c + 2))"
  ip -4 addr | grep -q " 10\.$a\.$b\.$c[0-9]*/" || break
done
cat >"$RUN/env" <<E
SSH_NS=$NS
SSH_HOST_IF=$HOST_IF
SSH_USER=$SSH_USER
SSH_ADDR=$SSH_ADDR
SSH_PORT=22
SSH_DEST=$SSH_USER@$SSH_ADDR
SSH_KEY=$RUN/client_key
KNOWN_HOSTS=$RUN/known_hosts
E

ip netns add "$NS"
ip link add "$HOST_IF" type veth peer name "$NS_IF"
ip link set "$NS_IF" netns "$NS"
ip addr add "$HOST_ADDR/30" dev "$HOST_IF"
ip link set "$HOST_IF" up
ip netns exec "$NS" ip addr add "$SSH_ADDR/30" dev "$NS_IF"
ip netns exec "$NS" ip link set "$NS_IF" up
ip netns exec "$NS" ip link set lo up

mkdir -p "$RUN/home" "$RUN/auth"
useradd -M -d "$RUN/home" -s /bin/sh -c "isthmus ssh test" -p "*" "$SSH_USER"  # "*": no password, not locked
echo "$SSH_USER" >"$RUN/user"
chown "$SSH_USER:" "$RUN/home" && chmod 755 "$RUN/home"
ssh-keygen -q -t ed25519 -N '' -C "isthmus-test-host" -f "$RUN/host_key"
ssh-keygen -q -t ed25519 -N '' -C "isthmus-test-client" -f "$RUN/client_key"
install -m 644 "$RUN/client_key.pub" "$RUN/auth/$SSH_USER"

cat >"$RUN/sshd_config" <<E
ListenAddress $SSH_ADDR
Port 22
HostKey $RUN/host_key
PidFile $RUN/sshd.pid
AuthorizedKeysFile $RUN/auth/%u
AllowUsers $SSH_USER
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
StrictModes no
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitUserEnvironment no
MaxSessions 32
LogLevel VERBOSE
E
ip netns exec "$NS" /usr/sbin/sshd -f "$RUN/sshd_config" -E "$RUN/sshd.log"
for _ in $(seq 1 100); do [ -s "$RUN/sshd.pid" ] && break; sleep 0.05; done

if [ -n "${FORWARD_SLURM:-}" ]; then
  port=$(sed -n 's/^SlurmctldPort=\([0-9]*\).*/\1/p' "$FORWARD_SLURM")
  [ -n "$port" ] || { echo "no SlurmctldPort in $FORWARD_SLURM" >&2; exit 1; }
  sock="$RUN/slurmctld.sock"
  python3 "$HERE/netns_forward.py" unix-to-tcp "$sock" 127.0.0.1 "$port" >"$RUN/fwd-host.log" 2>&1 &
  echo $! >"$RUN/fwd-host.pid"
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
  chmod 666 "$sock"
  ip netns exec "$NS" python3 "$HERE/netns_forward.py" tcp-to-unix 127.0.0.1 "$port" "$sock" \
    >"$RUN/fwd-ns.log" 2>&1 &
  echo $! >"$RUN/fwd-ns.pid"
  for _ in $(seq 1 100); do grep -q ready "$RUN/fwd-ns.log" 2>/dev/null && break; sleep 0.05; done
fi

# the known-hosts file as an operator fills it: ssh-keyscan, then the key checked against the host's
ssh-keyscan -T 5 -t ed25519 "$SSH_ADDR" 2>/dev/null >"$RUN/known_hosts"
grep -qF "$(cut -d' ' -f2 "$RUN/host_key.pub")" "$RUN/known_hosts" \
  || { echo "ssh-keyscan did not return this run's host key" >&2; exit 1; }
echo "$RUN"
