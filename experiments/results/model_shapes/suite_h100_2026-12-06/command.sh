# Run as `bash experiments/results/model_shapes/suite_h100_2026-12-06/command.sh` on the GPU host (H100), 2026-12-06,
# tree 5d7d96d (its tilesearch, search_spaces and scripts are 4baeb93's). The model-shape suite's six default shapes
# on an H100 (the issue's GPU; earlier suite runs were on H200s), then README's main command on fresh storages and
# caches (the first an empty cache, the others keeping NVRTC's header record), then each run's no-op rerun on its
# own storage and cache.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
timeout 430 python3 experiments/model_shapes.py out=$OUT/ms budget_s=370 > $OUT/ms_stdout.log 2>&1
echo "model_shapes rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
left=$(( 560 - ($(date +%s) - start) ))
CACHE=fresh timeout $left bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept \
  kept=.,HEADER=kept kept=.,HEADER=kept >> $OUT/summary.txt 2>&1
for db in $(ls /tmp/main_*_[0-9].db 2>/dev/null); do
  [ $(( 590 - ($(date +%s) - start) )) -gt 8 ] || break
  name=$(basename $db .db); s=$(date +%s.%N)
  timeout 10 env TILELANG_CACHE_DIR=/tmp/main_cache_${name#main_} python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 \
    k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:///$db > $OUT/rerun_$name.txt 2>&1
  echo "no-op rerun of $name: rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s $(grep -m1 -o 'measured now: [0-9]*' $OUT/rerun_$name.txt)" >> $OUT/summary.txt
done
grep -H -o 'pipeline: [0-9.]* configurations compiled per minute.*' $OUT/tune_main_*.txt >> $OUT/summary.txt
cp $OUT/ms/model_shapes.txt $OUT/model_shapes.txt 2>/dev/null
tar -C $OUT -czf $OUT/raw.tgz ms ms_stdout.log $(cd $OUT && ls tune_main_*.txt rerun_*.txt 2>/dev/null) 2>/dev/null
rm -rf $OUT/tune_main_*.txt $OUT/rerun_*.txt $OUT/ms_stdout.log $OUT/ms
echo "done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tail -25 $OUT/model_shapes.txt 2>/dev/null
cat $OUT/summary.txt
