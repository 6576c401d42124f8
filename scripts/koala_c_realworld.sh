#!/usr/bin/env bash
# KOALA-C's real-world experiment (§V-D; docs/koala-c.md) on real sites of this machine:
#   fs1, fs2  two private Slurm clusters (scripts/start_slurm.sh), 4 emulated nodes x 8 CPUs each
#             (32 processors, as the paper's 32 nodes), isthmus holding each node with a pilot job
#             (pilot mode: a Slurm job per run would add 1-2 s to every run, minutes of trace time
#             at this compression);
#   one, ec2  a free private cloud (up to 32 VMs) and a paid public cloud (up to 64 VMs, $0.065 per
#             VM-hour), each at its own local EC2-compatible server (scripts/start_ec2_server.sh,
#             moto), leased through Apache Libcloud; isthmus.live.vm_player boots each VM (runs
#             its user data: a pilot) after the site's boot time scaled like everything else.
# Starts them, writes the environment, runs
#   isthmus experiment koala-c-realworld --env <it> --scale $SCALE "$@"
# and stops only what it started. Needs the dev extra (moto, boto3) and root for Slurm.
#   bash scripts/koala_c_realworld.sh -o docs/experiments/koala-c-realworld --repeat 2
# SCALE (default 1/120: 12 hours in 6 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE=${SCALE:-1/120}
PY=.venv/bin/python
RUN=$(mktemp -d /tmp/isthmus-realworld.XXXXXX)
chmod 755 "$RUN"  # munged (user munge) reaches the Slurm directories inside
PLAYERS=()

cleanup() {
  for pid in "${PLAYERS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PLAYERS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  for site in one ec2; do
    [ -d "$RUN/$site" ] && bash scripts/stop_ec2_server.sh "$RUN/$site" >/dev/null 2>&1 || true
  done
  for site in fs1 fs2; do
    [ -d "$RUN/$site" ] && bash scripts/stop_slurm.sh "$RUN/$site" >/dev/null 2>&1 || true
  done
  rm -rf "$RUN"
}
trap cleanup EXIT

boot_delay() {  # the site's boot time (s) x SCALE
  "$PY" -c "import sys; from fractions import Fraction; print(float($1 * Fraction(sys.argv[1])))" "$SCALE"
}

conf_fs1=$(SLURM_RUNDIR=$RUN/fs1 NODES=4 CPUS=8 PARTITION=fs1 bash scripts/start_slurm.sh | tail -1)
conf_fs2=$(SLURM_RUNDIR=$RUN/fs2 NODES=4 CPUS=8 PARTITION=fs2 bash scripts/start_slurm.sh | tail -1)
url_one=$(EC2_RUNDIR=$RUN/one bash scripts/start_ec2_server.sh | tail -1)
url_ec2=$(EC2_RUNDIR=$RUN/ec2 bash scripts/start_ec2_server.sh | tail -1)
"$PY" -m isthmus.live.vm_player --endpoint "$url_one" --boot-delay "$(boot_delay 60)" --work "$RUN/one-vms" \
  --tag "realworld-$$" &
PLAYERS+=($!)
"$PY" -m isthmus.live.vm_player --endpoint "$url_ec2" --boot-delay "$(boot_delay 120)" --work "$RUN/ec2-vms" \
  --tag "realworld-$$" &
PLAYERS+=($!)

# The bundled koala-c-realworld environment with real backends: the same sizes, times and sets.
cat >"$RUN/env.toml" <<EOF
name = "koala-c-realworld-live"
description = "KOALA-C real-world on this machine: two Slurm clusters, two EC2-compatible clouds"
round_interval = 30

[policies]
allocation = "ff"
provisioning = "on-demand"

[[sites]]
name = "fs1"
nodes = 4
cores_per_node = 8
[sites.lrm]
driver = "slurm"
mode = "pilot"
config = "$conf_fs1"
partition = "fs1"
poll_interval = 0.5

[[sites]]
name = "fs2"
nodes = 4
cores_per_node = 8
[sites.lrm]
driver = "slurm"
mode = "pilot"
config = "$conf_fs2"
partition = "fs2"
poll_interval = 0.5

[[sites]]
name = "one"
kind = "cloud"
cores_per_node = 1
max_vms = 32
boot_time = 60
shutdown_time = 10
price_per_hour = 0
billing_increment = 3600
idle_release_time = 300
[sites.provider]
driver = "ec2"
image = "ami-12c6146b"
instance_type = "t2.micro"
endpoint = "$url_one"
key_env = "ISTHMUS_EC2_KEY"
secret_env = "ISTHMUS_EC2_SECRET"
boot_timeout = 60

[[sites]]
name = "ec2"
kind = "cloud"
cores_per_node = 1
max_vms = 64
boot_time = 120
shutdown_time = 30
price_per_hour = 0.065
billing_increment = 3600
idle_release_time = 300
[sites.provider]
driver = "ec2"
image = "ami-12c6146b"
instance_type = "t2.micro"
endpoint = "$url_ec2"
key_env = "ISTHMUS_EC2_KEY"
secret_env = "ISTHMUS_EC2_SECRET"
boot_timeout = 60

[[sets]]
name = "short"
sites = ["fs1", "fs2", "one", "ec2"]
runtime_limit = 600

[[sets]]
name = "long"
sites = ["fs2", "one", "ec2"]
EOF

export ISTHMUS_EC2_KEY=testing ISTHMUS_EC2_SECRET=testing
.venv/bin/isthmus experiment koala-c-realworld --env "$RUN/env.toml" --scale "$SCALE" "$@"
