# Run as `bash experiments/results/kernels/single_block_h100_2026-12-06/command.sh` on the GPU host (H100), 2026-12-06,
# tree ff9444a. The cluster program's single-block variant checked against float64, then probed at the long-K model
# shapes and 8192^3 beside the template and the paired program (scripts/cluster_probe.py set=single), then README's
# main command on fresh storages and caches with each run's no-op rerun, while the call's time lasts.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
timeout 150 python3 -m pytest -q -m gpu tests/test_gemm_cluster.py -k single -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$? after $(el) s: $(tail -1 $OUT/pytest_gpu.log)" >> $OUT/summary.txt
timeout 330 python3 scripts/cluster_probe.py out=$OUT/probe set=single rounds=100 > $OUT/probe.log 2>&1
echo "cluster_probe rc=$? after $(el) s" >> $OUT/summary.txt
left=$(( 545 - $(el) ))
if [ $left -gt 50 ]; then
  CACHE=fresh timeout $left bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept kept=.,HEADER=kept \
    kept=.,HEADER=kept >> $OUT/summary.txt 2>&1
fi
for db in $(ls /tmp/main_*_[0-9].db 2>/dev/null); do
  [ $(( 588 - $(el) )) -gt 8 ] || break
  name=$(basename $db .db); s=$(date +%s.%N)
  timeout 10 env TILELANG_CACHE_DIR=/tmp/main_cache_${name#main_} python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 \
    k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:///$db > $OUT/rerun_$name.txt 2>&1
  echo "no-op rerun of $name: rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s $(grep -m1 -o 'measured now: [0-9]*' $OUT/rerun_$name.txt)" >> $OUT/summary.txt
done
grep -H -o 'pipeline: [0-9.]* configurations compiled per minute.*' $OUT/tune_main_*.txt >> $OUT/summary.txt 2>/dev/null
tar -C $OUT -czf $OUT/raw.tgz probe pytest_gpu.log $(cd $OUT && ls tune_main_*.txt rerun_*.txt 2>/dev/null) 2>/dev/null
rm -rf $OUT/tune_main_*.txt $OUT/rerun_*.txt $OUT/probe
echo "done after $(el) s" >> $OUT/summary.txt
grep -v "^  .*status\|^$" $OUT/probe.log | tail -60
cat $OUT/summary.txt
