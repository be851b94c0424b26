# Run as `bash experiments/results/fast/launch_order_h100_2026-12-06/command2.sh` on the GPU host.
# 2026-12-06, second call: four more alternating pairs of README's main command, before (.before = 4baeb93) and
# after (. = 4868fe8), then a timeline of each tree (each trial's submit, build, measurement and record).
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host2.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary2.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept \
  >> $OUT/summary2.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary2.txt
header=$(ls /tmp/main_cache_after_9/nvrtc/tilesearch-header-*.json | head -1)
for tree in .before .; do
  label=$([ "$tree" = . ] && echo after || echo before)
  rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
  (cd $tree && TILELANG_CACHE_DIR=/tmp/tl_cache PYTHONPATH=$PWD:$PYTHONPATH timeout 90 python3 $OLDPWD/scripts/timeline_probe.py \
    out=$OUT/tl_$label -- tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 verbose=true \
    progress=false storage=sqlite:////tmp/tl_$label.db) > $OUT/timeline_$label.txt 2>&1
  echo "timeline $label rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary2.txt
done
tar -C $OUT -czf $OUT/runs2.tgz $(cd $OUT && ls -d tune_main_*.txt timeline_*.txt tl_*) && rm -rf $OUT/tune_main_*.txt $OUT/tl_* $OUT/timeline_*.txt
cat $OUT/summary2.txt
