# Run as `bash experiments/results/model_shapes/short_k_rivals_h100_2026-12-07/command.sh` on the GPU host, 2026-12-07,
# with 05a5fb6 (the tree before) unpacked in .before
# (`mkdir .before && git archive 05a5fb6 tilesearch search_spaces plugins pyproject.toml | tar -x -C .before`).
# The model-shape suite's two short-K squares (8192x8192x256 nt, bf16 and fp16), 40 xgb trials each, searched by the
# tree before and after the schedule rival moved second (728ebbd), each run from inside its own tree, each best
# re-timed beside torch.matmul (cuBLAS) in a fresh worker, interleaved. BUDGET: each search's seconds (default 100).
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader >> $OUT/summary.txt
shapes=odd.short_k.bfloat16,odd.short_k.float16
for tree in before after; do
  dir=$PWD; commit=728ebbd
  [ $tree = before ] && dir=$PWD/.before && commit=05a5fb6
  (cd $dir && TILESEARCH_COMMIT=$commit PYTHONPATH=$dir:$PYTHONPATH timeout $(( ${BUDGET:-100} + 60 )) python3 $OLDPWD/experiments/model_shapes.py \
    out=$OUT/$tree shapes=$shapes peers=torch budget_s=${BUDGET:-100} > $OUT/${tree}_stdout.log 2>&1)
  echo "$tree rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
done
for tree in before after; do echo "== $tree"; grep -hE "^gemm|^ \*|^  torch" $OUT/$tree/*.txt 2>/dev/null || tail -5 $OUT/${tree}_stdout.log; done > $OUT/table.txt
tar -C $OUT -czf $OUT/raw.tgz before after before_stdout.log after_stdout.log 2>/dev/null && rm -rf $OUT/before $OUT/after $OUT/before_stdout.log $OUT/after_stdout.log
cat $OUT/table.txt $OUT/summary.txt
