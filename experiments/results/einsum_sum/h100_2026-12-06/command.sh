# Run as `bash experiments/results/einsum_sum/h100_2026-12-06/command.sh` on the GPU host (H100), 2026-12-06, tree
# f307030: einsum-sum's bench at t=k=8192, h=16, d=128 with float32 and bfloat16 S on an H100 (the GPU; the
# 2026-12-04 figures are an H200's), with the copy floor measured in the same run.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
timeout 400 python3 experiments/einsum_sum_bench.py out=$OUT/bench problems=8192,8192-bf16out trials=40 budget_s=300 > $OUT/bench_stdout.log 2>&1
echo "bench rc=$? after $(( $(date +%s) - start )) s" > $OUT/summary.txt
cp $OUT/bench/einsum_sum_bench.txt $OUT/ 2>/dev/null
tar -C $OUT -czf $OUT/raw.tgz bench bench_stdout.log 2>/dev/null; rm -rf $OUT/bench $OUT/bench_stdout.log
tail -40 $OUT/einsum_sum_bench.txt 2>/dev/null
cat $OUT/summary.txt
