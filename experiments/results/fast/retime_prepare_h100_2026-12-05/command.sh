# Run as `bash experiments/results/fast/retime_prepare_h100_2026-12-05/command.sh`.
# 2026-12-05: README's main command, the tree before (.before = e239f5a, unpacked with `git archive e239f5a
# tilesearch search_spaces plugins scripts pyproject.toml`) alternating with after (. = the working tree:
# ba047ce, the nested bootstrap vectorised, and c2f5106, the final re-time's processes prepared side by side),
# each run on a fresh storage and an empty TileLang cache holding only NVRTC's header record (the cold first
# run makes it); then a no-op rerun, the fork server's start alone (import tilelang, the warm-up module with the
# header record), and a timeline of after.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept \
  >> $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
s=$(date +%s.%N)
TILELANG_CACHE_DIR=/tmp/main_cache_after_9 python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 \
  strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_after_9.db > $OUT/noop_1.txt 2>&1
echo "no-op rerun rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.2f}')")s" >> $OUT/summary.txt
for i in 1 2; do
  python3 -c "import time; t = time.time(); import tilelang; print(f'import tilelang: {time.time() - t:.2f} s')" >> $OUT/summary.txt 2>&1
  TILELANG_CACHE_DIR=/tmp/main_cache_after_9 python3 -c "
import time; t = time.time()
from tilesearch.builder import compiler
recorded = compiler._recorded_header('sm_90a') is not None
import tilesearch.builder.warm
print(f'fork server warm-up (header record found: {recorded}): {time.time() - t:.2f} s')" >> $OUT/summary.txt 2>&1
done
python3 -X importtime -c "import tilelang" 2> $OUT/importtime.txt
sort -t'|' -k2 -n -r $OUT/importtime.txt | head -12 >> $OUT/summary.txt
header=$(ls /tmp/main_cache_after_9/nvrtc/tilesearch-header-*.json | head -1)
rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
TILELANG_CACHE_DIR=/tmp/tl_cache timeout 120 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 k=8192 \
  dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt noop_*.txt) timeline.txt importtime.txt tl && rm -rf $OUT/tune_main_*.txt $OUT/noop_*.txt $OUT/tl $OUT/importtime.txt
grep -A14 "first of each event" $OUT/timeline.txt | head -16 >> $OUT/summary.txt
grep -E "run [0-9]+:|no-op|after|import|warm-up|final" $OUT/summary.txt
