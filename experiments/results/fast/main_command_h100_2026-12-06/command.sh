# Run as `bash experiments/results/fast/main_command_h100_2026-12-06/command.sh` on the GPU host.
# 2026-12-06, third call: every target of the fast-tuning issue on the tree as it stands (5b2ac71; its tilesearch is
# 4baeb93's): README's main command six times, each on a fresh storage and TileLang cache (the first an empty one, as
# on a new machine; the others holding NVRTC's header record, as on a machine that has tuned before), then each
# run's no-op rerun on its own storage and cache.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. head=.,HEADER=kept head=.,HEADER=kept head=.,HEADER=kept head=.,HEADER=kept \
  head=.,HEADER=kept >> $OUT/summary.txt 2>&1
for i in 1 2 3 4 5 6; do
  label=$([ $i = 1 ] && echo cold || echo head)
  s=$(date +%s.%N)
  TILELANG_CACHE_DIR=/tmp/main_cache_${label}_$i python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
    strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/main_${label}_$i.db > $OUT/rerun_$i.txt 2>&1
  rc=$?
  echo "no-op rerun of run $i: rc=$rc wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s $(grep -m1 -o 'measured now: [0-9]*' $OUT/rerun_$i.txt)" >> $OUT/summary.txt
done
grep -h -o 'pipeline: [0-9.]* configurations compiled per minute.*' $OUT/tune_main_*.txt >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt rerun_*.txt) && rm -f $OUT/tune_main_*.txt $OUT/rerun_*.txt
echo "done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
cat $OUT/summary.txt
