# call 1 (2026-12-04): einsum-sum's reduce_cluster (hi/lo products on the GEMM's persistent cluster
# program) checked against float64, then the einsum bench at t=k=8192 (float32 and bfloat16 S).
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null || true
timeout 200 python3 -m pytest -q -m gpu tests/test_einsum_sum_cluster.py -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
tail -3 $OUT/pytest_gpu.log
timeout $(( 570 - ($(date +%s) - start) )) python3 experiments/einsum_sum_bench.py out=$OUT/bench problems=8192,8192-bf16out trials=40 budget_s=400 > $OUT/bench_stdout.log 2>&1
echo "bench rc=$? after $(( $(date +%s) - start )) s" | tee -a $OUT/summary.txt
tar -C $OUT -czf $OUT/raw.tgz bench bench_stdout.log pytest_gpu.log 2>/dev/null
cat $OUT/bench/einsum_sum_bench.txt 2>/dev/null | tail -40 || tail -30 $OUT/bench_stdout.log
tail -5 $OUT/bench_stdout.log
