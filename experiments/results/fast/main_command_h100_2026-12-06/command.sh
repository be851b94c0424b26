# Run as `bash experiments/results/fast/main_command_h100_2026-12-06/command.sh` on the GPU host (H100), 2026-12-06,
# tree f307030 (a record's attributes upserted in one statement): README's main command on fresh storages and caches
# (a cold run, then runs keeping NVRTC's header record), each with its no-op rerun, on the machine start of the
# single-block and einsum-sum calls of the same day.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
lscpu | grep -E "Model name|MHz|^CPU\(s\)" >> $OUT/host.txt 2>&1
CACHE=fresh timeout 240 bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept > $OUT/summary.txt 2>&1
for db in $(ls /tmp/main_*_[0-9].db 2>/dev/null); do
  name=$(basename $db .db); s=$(date +%s.%N)
  timeout 10 env TILELANG_CACHE_DIR=/tmp/main_cache_${name#main_} python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 \
    k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:///$db > $OUT/rerun_$name.txt 2>&1
  echo "no-op rerun of $name: rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s $(grep -m1 -o 'measured now: [0-9]*' $OUT/rerun_$name.txt)" >> $OUT/summary.txt
done
grep -H -o 'pipeline: [0-9.]* configurations compiled per minute.*' $OUT/tune_main_*.txt >> $OUT/summary.txt 2>/dev/null
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_*.txt
echo "done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
cat $OUT/summary.txt; cat $OUT/host.txt
