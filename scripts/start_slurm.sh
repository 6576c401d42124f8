#!/usr/bin/env bash
# Start a private Slurm: one controller and NODES emulated nodes (several slurmd on this host,
# ../shared/lrm/NOTES.md), with its own munged, configuration, state and free ports, all in
# SLURM_RUNDIR (default: a new directory under /tmp). Prints the path of its slurm.conf last:
# clients and isthmus find this Slurm through SLURM_CONF=<that path>. Two runs at once do not
# share anything; scripts/stop_slurm.sh SLURM_RUNDIR stops only what this started.
# Installs slurmctld, slurmd, slurm-client and munge with apt-get if they are missing (root).
#   export ISTHMUS_TEST_SLURM=$(bash scripts/start_slurm.sh | tail -1)
# NODES (default 4) x CPUS (default 2); PARTITION (default debug).
set -euo pipefail
NODES=${NODES:-4}
CPUS=${CPUS:-2}
PARTITION=${PARTITION:-debug}
RUN=${SLURM_RUNDIR:-$(mktemp -d /tmp/isthmus-slurm.XXXXXX)}
mkdir -p "$RUN"/{state,log,spool,munge}
RUN=$(cd "$RUN" && pwd)
chmod 755 "$RUN"  # munged (user munge) reaches its directory inside

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
  || ! command -v munged >/dev/null; then
  echo "installing slurmctld, slurmd, slurm-client and munge..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >&2
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# munge of this run only: its own key and socket (the daemons and clients are told by AuthInfo)
chown munge:munge "$RUN/munge" && chmod 711 "$RUN/munge"  # clients reach the socket, nobody lists the key
if [ ! -f "$RUN/munge/munge.key" ]; then
  dd if=/dev/urandom of="$RUN/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$RUN/munge/munge.key" && chmod 400 "$RUN/munge/munge.key"
fi
SOCKET="$RUN/munge/munge.socket"
runuser -u munge -- /usr/sbin/munged --socket="$SOCKET" --key-file="$RUN/munge/munge.key" \
  --pid-file="$RUN/munge/munged.pid" --log-file="$RUN/munge/munged.log" --seed-file="$RUN/munge/munged.seed"

CTLD_PORT=$(free_port)
NODE_LINES=""
for i in $(seq 1 "$NODES"); do
  NODE_LINES+="NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$CPUS RealMemory=2048 State=UNKNOWN"$'\n'
done
CLUSTER="isthmus$(basename "$RUN" | tr -dc 'a-z0-9' | tail -c 8)"
cat >"$RUN/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$RUN/state
SlurmdSpoolDir=$RUN/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$RUN/log/slurmctld.log
SlurmdLogFile=$RUN/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$RUN/log/jobcomp.txt
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
ReturnToService=2
MinJobAge=300
KillWait=2
InactiveLimit=0
Waittime=0
SchedulerParameters=sched_interval=1
$NODE_LINES
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
export SLURM_CONF="$RUN/slurm.conf"
/usr/sbin/slurmctld -i -f "$SLURM_CONF"
for i in $(seq 1 "$NODES"); do
  /usr/sbin/slurmd -N "n$i" -f "$SLURM_CONF"
done
for _ in $(seq 1 150); do
  states=$(sinfo -h -N -o %t 2>/dev/null | sort -u | tr '\n' ' ')
  if [ "$states" = "idle " ]; then
    echo "slurm up in $RUN: $NODES nodes x $CPUS CPUs, partition $PARTITION" >&2
    echo "$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "error: Slurm in $RUN did not come up (node states: ${states:-none}); logs in $RUN/log" >&2
exit 1
