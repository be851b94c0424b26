# Run as `LIMIT=560 bash experiments/results/model_shapes/suite_default_vs_single_2026-12-07/command.sh` on the GPU host
# (2026-12-07, night): the model-shape suite's six default shapes (40 xgb trials each, each best re-timed beside
# torch.matmul in a fresh worker, interleaved; Triton left out to fit one call: it trailed by 29-42% in the last
# suite) searched twice on one machine with the polish rivals of b582c8f (the deepest pipeline at the best's K step,
# the chunked rival fitted to a width of whole chunks): first in the default space, then with the single block's
# persistent chunked program offered where K is long (TILESEARCH_CLUSTER=single). Each search gets half the call.
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=99e0f8c  # the tree sent (its tilesearch and GEMM plugin are 99e0f8c's)
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores; tree $TILESEARCH_COMMIT" > $OUT/summary.txt
each=$(( (${LIMIT:-560} - $(el) - 10) / 2 ))
timeout $each python3 experiments/model_shapes.py out=$OUT/default peers=torch budget_s=$(( each - 45 )) > $OUT/default_stdout.log 2>&1
echo "default rc=$? after $(el) s" >> $OUT/summary.txt
TILESEARCH_CLUSTER=single timeout $each python3 experiments/model_shapes.py out=$OUT/single peers=torch budget_s=$(( each - 45 )) \
  > $OUT/single_stdout.log 2>&1
echo "single rc=$? after $(el) s" >> $OUT/summary.txt
for run in default single; do echo "== $run"; grep -hE "^gemm|^ \*|^  torch" $OUT/$run/*.txt 2>/dev/null || tail -5 $OUT/${run}_stdout.log; done > $OUT/table.txt
tar -C $OUT -czf $OUT/raw.tgz default single default_stdout.log single_stdout.log 2>/dev/null && rm -rf $OUT/default $OUT/single $OUT/default_stdout.log $OUT/single_stdout.log
cat $OUT/table.txt $OUT/summary.txt
