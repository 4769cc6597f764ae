#!/usr/bin/env bash
# One xdrl run whose collector workers (Ray actors) step on every node of a SLURM allocation:
# the Ray head starts on the allocation's first node, a Ray worker on each other node (srun), and
# `xdrl-train collector=ray collector.address=<head>` runs on the first node with the arguments
# given here. The cluster lives as long as the job; it stops with the run.
#
#   sbatch --nodes=2 --ntasks-per-node=1 --cpus-per-task=16 scripts/ray-slurm.sh \
#       experiment=atari_ppo collector.workers=24
#
# Each node offers Ray its task's CPUs (--cpus-per-task); every actor takes one, so
# collector.workers up to nodes x cpus-per-task minus the learner's. Environment overrides:
#   XDRL_TRAIN     the xdrl-train to run (default: the one on PATH); ray and python beside it
#   XDRL_RAY_PORT  the head's port (default: 6379 + the job id modulo 1000, so that two jobs
#                  sharing a node do not collide)
set -euo pipefail

[[ -n ${SLURM_JOB_ID:-} ]] || { echo "ray-slurm.sh: run it inside a SLURM allocation (sbatch or salloc)" >&2; exit 2; }
XDRL_TRAIN=${XDRL_TRAIN:-$(command -v xdrl-train)}
BIN=$(dirname "$XDRL_TRAIN")
RAY="$BIN/ray"
[[ -x $RAY ]] || { echo "ray-slurm.sh: no ray beside $XDRL_TRAIN; pip install 'xdrl[ray]'" >&2; exit 2; }

mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD=${NODES[0]}
HEAD_IP=$(srun --nodes=1 --ntasks=1 --overlap -w "$HEAD" hostname -I | awk '{print $1}')  # not --ip-address: 127.0.1.1 on Debian
PORT=${XDRL_RAY_PORT:-$((6379 + SLURM_JOB_ID % 1000))}
ADDRESS="$HEAD_IP:$PORT"
CPUS=${SLURM_CPUS_PER_TASK:-1}
TEMP="/tmp/xdrl-ray-$SLURM_JOB_ID"  # Ray's sockets live here: short, and the job's own
# Token authentication with a token of this job's, which every step inherits (srun exports the
# environment): Ray 2.60 turns tokens on where ~/.ray/auth_token exists, and a run that joins an
# explicit address only sends one when RAY_AUTH_MODE says so.
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=${RAY_AUTH_TOKEN:-$("$BIN/python" -c 'import secrets; print(secrets.token_hex(32))')}
export RAY_AUTH_TOKEN

STEPS=()
stop_cluster() {
    local pid
    for pid in "${STEPS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done  # srun forwards it
    for pid in "${STEPS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$TEMP" "$TEMP".*.log
}
trap stop_cluster EXIT

# The head, then one worker per other node; each `ray start --block` stays in its job step and
# stops its Ray processes when the step is signalled.
srun --nodes=1 --ntasks=1 --overlap -w "$HEAD" "$RAY" start --head --block --port="$PORT" \
    --node-ip-address="$HEAD_IP" --num-cpus="$CPUS" --include-dashboard=false \
    --temp-dir="$TEMP" >"$TEMP.head.log" 2>&1 &
STEPS+=($!)
answers() { "$BIN/python" -c "import socket,sys; socket.create_connection(('$HEAD_IP', $PORT), 2).close()" 2>/dev/null; }
until answers; do
    kill -0 "${STEPS[0]}" 2>/dev/null || { cat "$TEMP.head.log" >&2; exit 1; }
    sleep 1
done
for node in "${NODES[@]:1}"; do
    srun --nodes=1 --ntasks=1 --overlap -w "$node" "$RAY" start --block --address="$ADDRESS" \
        --num-cpus="$CPUS" --temp-dir="$TEMP" >"$TEMP.$node.log" 2>&1 &
    STEPS+=($!)
done
# Until every node has joined (else the actors would all land on the nodes that came first).
"$BIN/python" - "$ADDRESS" "${#NODES[@]}" <<'EOF'
import sys
import time

import ray

address, nodes = sys.argv[1], int(sys.argv[2])
ray.init(address=address, log_to_driver=False, configure_logging=False)
while sum(n["Alive"] for n in ray.nodes()) < nodes:
    time.sleep(1)
print(f"ray-slurm.sh: {nodes} Ray nodes at {address}, {ray.cluster_resources()['CPU']:.0f} CPUs",
      file=sys.stderr)
EOF

"$XDRL_TRAIN" collector=ray collector.address="$ADDRESS" "$@"
