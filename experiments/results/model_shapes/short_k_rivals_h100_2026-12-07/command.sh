# Run as `bash experiments/results/model_shapes/short_k_rivals_h100_2026-12-07/command.sh` on the GPU host, 2026-12-07,
# tree aefbba8 (whose tilesearch and GEMM plugin are 728ebbd's), with 05a5fb6 (the tree before) unpacked in .before
# (`mkdir .before && git archive 05a5fb6 tilesearch search_spaces plugins pyproject.toml | tar -x -C .before`).
# The model-shape suite's short-K squares (8192x8192x256 nt, bf16 first, then fp16 while time is left), 40 xgb
# trials each, searched by the tree before and after the schedule rival moved second (728ebbd), each run from inside
# its own tree, each best re-timed beside torch.matmul (cuBLAS) in a fresh worker, interleaved.
# LIMIT: the seconds this script may take (default 420).
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader); set up after $(el) s" >> $OUT/summary.txt
for shape in odd.short_k.bfloat16 odd.short_k.float16; do
  for tree in before after; do
    left=$(( ${LIMIT:-420} - $(el) ))
    [ $left -lt 120 ] && { echo "$shape $tree: skipped, $left s left" >> $OUT/summary.txt; continue; }
    dir=$PWD; commit=aefbba8
    [ $tree = before ] && dir=$PWD/.before && commit=05a5fb6
    (cd $dir && TILESEARCH_COMMIT=$commit PYTHONPATH=$dir:$PYTHONPATH timeout $(( left - 5 )) python3 $OLDPWD/experiments/model_shapes.py \
      out=$OUT/${tree}_$shape shapes=$shape peers=torch > $OUT/${tree}_${shape}_stdout.log 2>&1)
    echo "$shape $tree rc=$? after $(el) s" >> $OUT/summary.txt
  done
done
for d in $OUT/*_odd.*/; do echo "== $(basename $d)"; grep -hE "^gemm|^ \*|^  torch" $d/*.txt 2>/dev/null || tail -5 ${d%/}_stdout.log; done > $OUT/table.txt
(cd $OUT && tar -czf raw.tgz *_odd.* && rm -rf *_odd.*)
cat $OUT/table.txt $OUT/summary.txt
