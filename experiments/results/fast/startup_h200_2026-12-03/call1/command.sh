# commit 322a0ea (+ uncommitted test-speed work in tests/ and tilesearch/ by a helper), repository root on the GPU host
# call 1 (2026-12-03): the GPU tests not yet run with NVRTC as the default, then README's main command
# once (fresh cache) and its no-op rerun under -X importtime and cProfile: where the 2 s outside tune's
# wall go.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
s=$(date +%s.%N)
CACHE=fresh bash scripts/time_main_command.sh cold=. > $OUT/summary.txt 2>&1
db=/tmp/main_cold_1.db; cache=/tmp/main_cache_cold_1
s=$(date +%s.%N)
TILELANG_CACHE_DIR=$cache python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 progress=false storage=sqlite:///$db > $OUT/noop.txt 2>&1
echo "no-op rerun rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s" >> $OUT/summary.txt
s=$(date +%s.%N)
TILELANG_CACHE_DIR=$cache python3 -X importtime -m cProfile -o $OUT/noop.prof -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 progress=false storage=sqlite:///$db > $OUT/noop_importtime.txt 2>&1
echo "no-op rerun under cProfile rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s" >> $OUT/summary.txt
python3 -c "
import pstats; st = pstats.Stats('$OUT/noop.prof'); st.sort_stats('cumulative').print_stats(40)" > $OUT/noop_profile.txt 2>&1
timeout -s INT 380 python3 -m pytest -q -m gpu tests/test_compiler.py tests/test_driver.py tests/test_faults.py tests/test_nn_linear.py tests/test_gemm_gpu.py tests/test_experiment.py tests/test_range_tuner.py -p no:cacheprovider -rA --durations=15 > $OUT/pytest_gpu.log 2>&1
echo "pytest gpu rc=$?" >> $OUT/summary.txt
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)" $OUT/pytest_gpu.log | cut -c1-150 >> $OUT/summary.txt
tail -3 $OUT/pytest_gpu.log >> $OUT/summary.txt
cat $OUT/summary.txt
