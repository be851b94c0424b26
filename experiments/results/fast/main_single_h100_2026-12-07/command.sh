# Run as `bash experiments/results/fast/main_single_h100_2026-12-07/command.sh` on the GPU host, 2026-12-07, tree
# aefbba8: README's main command with the single block's persistent chunked program offered at long K
# (TILESEARCH_CLUSTER=single) and in the default space, alternating, each on a fresh storage and TileLang cache
# holding only NVRTC's header record, each followed by a no-op rerun. Single runs, no intervals.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=aefbba8
CACHE=fresh RERUN=1 timeout 300 bash scripts/time_main_command.sh warm=. single=.,HEADER=kept,TILESEARCH_CLUSTER=single \
  default=.,HEADER=kept single=.,HEADER=kept,TILESEARCH_CLUSTER=single default=.,HEADER=kept > $OUT/main.txt 2>&1
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_main_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_main_*.txt
grep -v "^measured now" $OUT/main.txt | cut -c1-250
