# session 32 call 1 (2026-12-04), working tree at d574128 (bundle carried as .bundle)
# call 1 (2026-12-04, session 32): the new reduce block (b6319dc) through einsum-sum's GPU tests and
# bench, the reduce probe with the runner's rounds, and the cluster program where K is long
set -u
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
nvidia-smi >> $OUT/host.txt 2>&1
timeout 150 python3 -m pytest -q -m gpu tests/test_einsum_sum_specialized.py tests/test_einsum_sum_cluster.py tests/test_einsum_sum.py -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
echo "pytest rc=$? after $(el) s" | tee -a $OUT/summary.txt; tail -2 $OUT/pytest_gpu.log
timeout 230 python3 experiments/einsum_sum_bench.py out=$OUT/bench problems=8192,8192-bf16out trials=40 budget_s=200 > $OUT/bench_stdout.log 2>&1
echo "bench rc=$? after $(el) s" | tee -a $OUT/summary.txt
timeout 60 python3 scripts/reduce_probe.py rounds=200 > $OUT/reduce_probe.log 2>&1
echo "reduce_probe rc=$? after $(el) s" | tee -a $OUT/summary.txt
timeout $(( 560 - $(el) )) python3 scripts/cluster_probe.py out=$OUT/probe set=long_k rounds=100 > $OUT/cluster_probe.log 2>&1
echo "cluster_probe rc=$? after $(el) s" | tee -a $OUT/summary.txt
tar -C $OUT -czf $OUT/raw.tgz bench probe 2>/dev/null; rm -rf $OUT/bench/*.db $OUT/probe
tail -30 $OUT/bench/einsum_sum_bench.txt 2>/dev/null || tail -20 $OUT/bench_stdout.log
tail -12 $OUT/reduce_probe.log
tail -45 $OUT/cluster_probe.log
