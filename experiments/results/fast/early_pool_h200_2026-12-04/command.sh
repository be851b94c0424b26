# 2026-12-04: README's main command, alternating the tree before the compile pool's fork server
# was started first thing (.before = 23af043, unpacked with `git archive 23af043 tilesearch
# search_spaces plugins scripts pyproject.toml`) and after it (. = the working tree at 2501ddd),
# each run on a fresh storage and an empty TileLang cache holding NVRTC's header record (the
# first, cold, run makes it); then two no-op reruns of the last run's storage, and one timeline
# of the new tree.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept > $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
for i in 1 2; do
  s=$(date +%s.%N)
  TILELANG_CACHE_DIR=/tmp/main_cache_after_7 python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
    strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_after_7.db > $OUT/noop_$i.txt 2>&1
  echo "no-op rerun $i rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.2f}')")s" >> $OUT/summary.txt
done
header=$(ls /tmp/main_cache_after_7/nvrtc/tilesearch-header-*.json | head -1)
rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
TILELANG_CACHE_DIR=/tmp/tl_cache timeout 120 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 k=8192 \
  dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
for f in $OUT/tune_main_*.txt; do
  echo "$(basename $f): $(grep -E '^(worker: load|final re-time|measure|wait for build|wait for measure) ' $f | tr -s ' ' | tr '\n' ';')" >> $OUT/summary.txt
done
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt noop_*.txt) timeline.txt tl && rm -rf $OUT/tune_main_*.txt $OUT/noop_*.txt $OUT/tl
grep -A12 "first of each event" $OUT/timeline.txt | head -14 >> $OUT/summary.txt
cat $OUT/summary.txt | grep -vE "^measured now|^ +46"
