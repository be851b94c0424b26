# Run as `LIMIT=420 bash experiments/results/fast/main_single_h100_2026-12-07_night/command.sh` on the GPU host
# (2026-12-07, night, tree 99e0f8c, the polish rivals of b582c8f): README's main command with the single block's
# persistent chunked program offered at long K (TILESEARCH_CLUSTER=single) and in the default space, alternating,
# each on a fresh storage and TileLang cache holding only NVRTC's header record (as README's set-up leaves it);
# then the model-shape suite with it offered once more (40 xgb trials a shape, each best re-timed beside
# torch.matmul, interleaved), to see whether the chunked kernel is reached again at every long-K shape.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=99e0f8c
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
CACHE=fresh timeout 150 bash scripts/time_main_command.sh warm=. single=.,HEADER=kept,TILESEARCH_CLUSTER=single default=.,HEADER=kept \
  single=.,HEADER=kept,TILESEARCH_CLUSTER=single default=.,HEADER=kept > $OUT/main.txt 2>&1
echo "main rc=$? after $(el) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm -f $OUT/tune_main_*.txt
left=$(( ${LIMIT:-420} - $(el) ))
TILESEARCH_CLUSTER=single timeout $left python3 experiments/model_shapes.py out=$OUT/single peers=torch budget_s=$(( left - 45 )) \
  > $OUT/single_stdout.log 2>&1
echo "single suite rc=$? after $(el) s" >> $OUT/summary.txt
grep -hE "^gemm|^ \*|^  torch" $OUT/single/*.txt > $OUT/table.txt 2>/dev/null || tail -5 $OUT/single_stdout.log > $OUT/table.txt
tar -C $OUT -czf $OUT/raw.tgz single single_stdout.log 2>/dev/null && rm -rf $OUT/single $OUT/single_stdout.log
grep -E "^(warm|default|single) run|chosen" $OUT/main.txt | cut -c1-200; cat $OUT/table.txt $OUT/summary.txt
