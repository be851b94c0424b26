# Run as `bash experiments/results/fast/patience_h100_2026-12-06/command.sh` on the GPU host (H100), 2026-12-06:
# README's main command alternating the tree before the patience rule (a7aa9a2, its tilesearch, search_spaces and
# plugins unpacked in .before) and after (be1d2b9: a trial still compiling after 3 s is passed, the results after it recorded), fresh storages
# and caches keeping NVRTC's header record, then no-op reruns of the "after" runs.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores; $(lscpu | grep -m1 'Model name')" > $OUT/summary.txt
rm -rf /tmp/main_*
CACHE=fresh timeout $(( 400 - $(el) )) bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept \
  before=.before,HEADER=kept after=.,HEADER=kept >> $OUT/summary.txt 2>&1
for db in $(ls /tmp/main_after_*.db 2>/dev/null | head -3); do
  [ $(( 430 - $(el) )) -gt 8 ] || break
  name=$(basename $db .db); s=$(date +%s.%N)
  timeout 10 env TILELANG_CACHE_DIR=/tmp/main_cache_${name#main_} python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 \
    k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:///$db > $OUT/rerun_$name.txt 2>&1
  echo "no-op rerun of $name: rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s $(grep -m1 -o 'measured now: [0-9]*' $OUT/rerun_$name.txt)" >> $OUT/summary.txt
done
grep -H -o 'pipeline: [0-9.]* configurations compiled per minute.*\|^passed: [0-9]*' $OUT/tune_main_*.txt >> $OUT/summary.txt 2>/dev/null
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_*.txt 2>/dev/null) 2>/dev/null
rm -f $OUT/tune_main_*.txt $OUT/rerun_*.txt
echo "done after $(el) s" >> $OUT/summary.txt
cat $OUT/summary.txt
