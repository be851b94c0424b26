#!/usr/bin/env bash
# call 3 of 2026-12-03 (issue 13): the space of 7848428 (the cluster program at short K, only its persistent
# smem-epilogue kernels), searched on call 2's four shapes; call 2 searched the space without the knob. Run from the repo root.
set -u
source scripts/gpu-host.sh
export TILESEARCH_LOG=info
for tree in .; do
  label=$([ "$tree" = . ] && echo after || echo before)
  (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout 170 python experiments/model_shapes.py out=$OUT/ms_$label budget_s=120 \
     shapes=odd.short_k.bfloat16,odd.short_k_wide.float16 > $OUT/ms_${label}_stdout.log 2>&1)
  echo "model_shapes $label rc=$?"
done
for shape in "m=6144 n=12288 k=384 dtype=bfloat16 layout=nt" "m=12288 n=4096 k=768 dtype=float16 layout=nn"; do
  for tree in .; do
    label=$([ "$tree" = . ] && echo after || echo before)
    tag=$(echo "$shape" | tr -d ' =' | cut -c1-40)
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout 75 tilesearch tune op=gemm $shape strategy=xgb trials=40 \
       storage=sqlite:////tmp/tune_${label}_$tag.db > $OUT/tune_${label}_$tag.txt 2>&1)
    echo "tune $label $shape rc=$? $(grep -i 'x torch\|torch.matmul' $OUT/tune_${label}_$tag.txt | tail -2 | tr '\n' ' ')"
  done
done
cp /tmp/tune_*.db $OUT/ 2>/dev/null
cd $OUT && tar -czf raw.tgz ms_after *.db 2>/dev/null && rm -rf ms_after ms_before *.db
for label in after before; do grep -A12 -i 'ratio\|speedup' $OUT/ms_${label}_stdout.log | tail -14; done
