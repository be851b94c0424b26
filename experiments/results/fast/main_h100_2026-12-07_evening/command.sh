# Run as `bash experiments/results/fast/main_h100_2026-12-07_evening/command.sh` on the GPU host, 2026-12-07, tree
# aefbba8: README's main command (fast-tuning issue) on this session's machine, three runs each on a fresh storage
# and TileLang cache (the first empty, as on a fresh machine; the others holding only NVRTC's header record), each
# followed by a no-op rerun of itself. Single runs, no intervals.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=aefbba8
echo "set up after $(( $(date +%s) - start )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores; $(lscpu | grep 'Model name' | sed 's/  */ /g')" > $OUT/summary.txt
CACHE=fresh RERUN=1 timeout 200 bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept > $OUT/main.txt 2>&1
echo "main command rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_main_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_main_*.txt
cat $OUT/main.txt $OUT/summary.txt
