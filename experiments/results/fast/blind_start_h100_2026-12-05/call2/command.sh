# Run as `bash experiments/results/fast/blind_start_h200_2026-12-05/command.sh` (this file, before it moved here).
# 2026-12-05, call 2 (asked for an H200 when no H100 could be had; it ran on an H100): README's main command, as call 1
# (../call1/command.sh) with the trees in the other
# order: after (. = the working tree at 1327191, whose tune path is 7f68c55's: the blind start-up rounds launched at once) first, then
# before (.before = b5da85b, unpacked with `git archive b5da85b tilesearch search_spaces plugins scripts
# pyproject.toml`), each run on a fresh storage and an empty TileLang cache holding only NVRTC's header
# record (the cold first run makes it); then two no-op reruns of the last after run and a timeline.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept \
  before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  >> $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
for i in 1 2; do
  s=$(date +%s.%N)
  TILELANG_CACHE_DIR=/tmp/main_cache_after_8 python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
    strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_after_8.db > $OUT/noop_$i.txt 2>&1
  echo "no-op rerun $i rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.2f}')")s" >> $OUT/summary.txt
done
header=$(ls /tmp/main_cache_after_8/nvrtc/tilesearch-header-*.json | head -1)
rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
TILELANG_CACHE_DIR=/tmp/tl_cache timeout 120 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 k=8192 \
  dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt noop_*.txt) timeline.txt tl && rm -rf $OUT/tune_main_*.txt $OUT/noop_*.txt $OUT/tl
grep -A14 "first of each event" $OUT/timeline.txt | head -16 >> $OUT/summary.txt
grep -E "run [0-9]+:|no-op|after" $OUT/summary.txt
