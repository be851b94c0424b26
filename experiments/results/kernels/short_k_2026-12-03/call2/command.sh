#!/usr/bin/env bash
# call 2 of 2026-12-03 (issue 13): the cluster program offered at short K (after, 360060e) against the
# space without it (before, 30fe082), searched: the model-shape suite's two short-K shapes and two
# shapes no probe timed; then the cluster program's GPU correctness cases. Run from the repo root.
set -u
source scripts/gpu-host.sh
export TILESEARCH_LOG=info
timeout 150 python -m pytest -q -m gpu tests/test_gemm_cluster.py -p no:cacheprovider > $OUT/pytest_gpu_cluster.log 2>&1
echo "pytest gpu cluster rc=$?: $(tail -1 $OUT/pytest_gpu_cluster.log)"
for tree in . .before; do
  label=$([ "$tree" = . ] && echo after || echo before)
  (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout 170 python experiments/model_shapes.py out=$OUT/ms_$label budget_s=120 \
     shapes=odd.short_k.bfloat16,odd.short_k_wide.float16 > $OUT/ms_${label}_stdout.log 2>&1)
  echo "model_shapes $label rc=$?"
done
for shape in "m=6144 n=12288 k=384 dtype=bfloat16 layout=nt" "m=12288 n=4096 k=768 dtype=float16 layout=nn"; do
  for tree in . .before; do
    label=$([ "$tree" = . ] && echo after || echo before)
    tag=$(echo "$shape" | tr -d ' =' | cut -c1-40)
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout 75 tilesearch tune op=gemm $shape strategy=xgb trials=40 \
       storage=sqlite:////tmp/tune_${label}_$tag.db > $OUT/tune_${label}_$tag.txt 2>&1)
    echo "tune $label $shape rc=$? $(grep -i 'x torch\|torch.matmul' $OUT/tune_${label}_$tag.txt | tail -2 | tr '\n' ' ')"
  done
done
cp /tmp/tune_*.db $OUT/ 2>/dev/null
cd $OUT && tar -czf raw.tgz ms_after ms_before *.db 2>/dev/null && rm -rf ms_after ms_before *.db
for label in after before; do grep -A12 -i 'ratio\|speedup' $OUT/ms_${label}_stdout.log | tail -14; done
