# Run as `bash experiments/results/model_shapes/single_vs_default_2026-12-07/command.sh` on the GPU host: the 2026-12-06
# comparison again with the chunked rival's probe pipeline (de98942) and the rivals fitted by the space (94f9e5d).
# One call (2026-12-07, evening; run with LIMIT=560 BUDGET=200): the model-shape suite's three long-K Llama-3-8B shapes at 2048 tokens (o, gate/up, down;
# bf16 nt), searched twice on one machine with the same budget: first with the single block's persistent chunked
# program offered (TILESEARCH_CLUSTER=single), then in the default space. Each search's best is re-timed beside
# torch.matmul (cuBLAS) in a fresh worker, interleaved (Triton left out to fit one call; it trailed by 21-28% at
# these shapes before). Then the GPU tests of the cluster and single-block cases while the call lasts (LIMIT s,
# default 440; BUDGET: each space's seconds, default 150).
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader >> $OUT/summary.txt
export TILESEARCH_COMMIT=aefbba8  # the tree sent (its tilesearch and GEMM plugin are 728ebbd's)
shapes=llama3_8b.o.m2048.bfloat16,llama3_8b.gate_up.m2048.bfloat16,llama3_8b.down.m2048.bfloat16
TILESEARCH_CLUSTER=single timeout $(( ${BUDGET:-150} + 55 )) python3 experiments/model_shapes.py out=$OUT/single shapes=$shapes peers=torch \
  budget_s=${BUDGET:-150} > $OUT/single_stdout.log 2>&1
echo "single rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
timeout $(( ${BUDGET:-150} + 55 )) python3 experiments/model_shapes.py out=$OUT/default shapes=$shapes peers=torch budget_s=${BUDGET:-150} \
  > $OUT/default_stdout.log 2>&1
echo "default rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
left=$(( ${LIMIT:-440} - ($(date +%s) - start) ))
if [ $left -gt 40 ]; then
  timeout $left python3 -m pytest -q -m gpu tests/test_gemm_cluster.py -k float64 -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$? after $(( $(date +%s) - start )) s: $(tail -1 $OUT/gpu_tests.log)" >> $OUT/summary.txt
fi
for run in single default; do echo "== $run"; grep -hE "^gemm|^ \*|^  torch" $OUT/$run/*.txt 2>/dev/null || tail -5 $OUT/${run}_stdout.log; done > $OUT/table.txt
tar -C $OUT -czf $OUT/raw.tgz single default single_stdout.log default_stdout.log 2>/dev/null && rm -rf $OUT/single $OUT/default $OUT/single_stdout.log $OUT/default_stdout.log
cat $OUT/table.txt $OUT/summary.txt
