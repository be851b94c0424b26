# Run as `bash experiments/results/model_shapes/suite_single_h100_2026-12-07_late/command.sh` on the GPU host (H100),
# 2026-12-07, tree b582c8f: the model-shape suite's six default shapes (40 xgb trials each, each best re-timed beside
# torch.matmul and Triton's autotune in fresh workers, interleaved) with the single block's persistent chunked
# program offered where K is long (TILESEARCH_CLUSTER=single), after b582c8f (the polish's rivals: the best's K step
# as deep as it fits, the chunked program at the nearest width of whole chunks) and 9e3c459 (the single block's
# other forms pruned where K is long).
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_COMMIT=b582c8f
echo "set up after $(el) s; $(nvidia-smi --query-gpu=name --format=csv,noheader); $(nproc) cores" > $OUT/summary.txt
left=$(( ${LIMIT:-570} - $(el) ))
TILESEARCH_CLUSTER=single timeout $left python3 experiments/model_shapes.py out=$OUT/ms budget_s=$(( left - 90 )) > $OUT/ms_stdout.log 2>&1
echo "model_shapes rc=$? after $(el) s" >> $OUT/summary.txt
cp $OUT/ms/model_shapes.txt $OUT/model_shapes.txt 2>/dev/null
tar -C $OUT -czf $OUT/raw.tgz ms ms_stdout.log 2>/dev/null && rm -rf $OUT/ms $OUT/ms_stdout.log
grep -hE "^gemm|^ \*|^  torch|^  triton" $OUT/model_shapes.txt; cat $OUT/summary.txt
