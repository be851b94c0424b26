# Run as `bash experiments/results/fast/blind_start_h100_2026-12-05/command.sh` (this file, before it moved here).
# 2026-12-05: README's main command on an H100, alternating the tree before the blind start-up
# rounds were launched at once (.before = b5da85b, unpacked with `git archive b5da85b tilesearch
# search_spaces plugins scripts pyproject.toml`) and after (. = the working tree at 7f68c55), each run on a
# fresh storage and an empty TileLang cache holding only NVRTC's header record (the first, cold,
# run makes it); then two no-op reruns of the last run's storage and one timeline of the new tree.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept \
  >> $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
for i in 1 2; do
  s=$(date +%s.%N)
  TILELANG_CACHE_DIR=/tmp/main_cache_after_9 python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
    strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_after_9.db > $OUT/noop_$i.txt 2>&1
  echo "no-op rerun $i rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.2f}')")s" >> $OUT/summary.txt
done
header=$(ls /tmp/main_cache_after_9/nvrtc/tilesearch-header-*.json | head -1)
rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
TILELANG_CACHE_DIR=/tmp/tl_cache timeout 120 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 k=8192 \
  dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt noop_*.txt) timeline.txt tl && rm -rf $OUT/tune_main_*.txt $OUT/noop_*.txt $OUT/tl
grep -A14 "first of each event" $OUT/timeline.txt | head -16 >> $OUT/summary.txt
grep -E "run [0-9]+:|no-op|after" $OUT/summary.txt
