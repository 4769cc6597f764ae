#!/bin/bash
# Shared cores: atari_ppo frames/s quiet and beside 1 and 2 busy loops (k = 2, 3 processes per
# 2 cores), for collector=single with num_threads auto, workers=2, and single at 2 threads.
# Usage: bash scripts/shared_cores.sh [out dir]  (run on an otherwise quiet machine)
set -u
OUT=${1:-shared-cores}; mkdir -p "$OUT"; cd "$OUT" || exit 1
X=$(dirname "$(command -v python3)")/xdrl-train; [ -x "$X" ] || X=xdrl-train
run() { # name, extra args
  rm -rf "$1"; $X experiment=atari_ppo total_frames=16384 logging=none checkpoint.enabled=false eval.enabled=false run_dir=$PWD/$1 "${@:2}" >/dev/null 2>&1
  python3 -c "import json;s=json.load(open('$1/summary.json'));print('$1', s['frames_per_second'], 'threads', s['segments'][-1]['torch_threads'])"
}
for loops in 0 1 2; do
  pids=(); for i in $(seq 1 $loops); do python3 -c "while True: pass" & pids+=($!); done; sleep 1
  run single-l$loops
  run w2-l$loops collector=multiprocess collector.workers=2
  run single2t-l$loops num_threads=2
  for p in "${pids[@]}"; do kill $p; done
done
