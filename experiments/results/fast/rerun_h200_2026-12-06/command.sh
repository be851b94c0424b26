# Run on the GPU host (an H200), 2026-12-06, tree 67e27bb, after the two calls of
# model_shapes/single_vs_default_2026-12-06 and kernels/chunked_h200_2026-12-06 on the same machine:
# README's main command four times, each on a fresh storage and an empty cache folder (the later three
# keeping NVRTC's header record), each followed by a no-op rerun of itself (RERUN=1).
source scripts/gpu-host.sh > /dev/null 2>&1; CACHE=fresh RERUN=1 timeout 240 bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept kept=.,HEADER=kept > $OUT/summary.txt 2>&1; echo rc=$?; tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_main_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_main_*.txt; cat $OUT/summary.txt
