# commit 868b9e1 plus the CACHE=fresh option of scripts/time_main_command.sh (committed after), in the repository root on the GPU host
# call 1 (2026-12-01): README's main command, alternating the tree before this session (0355b2f,
# .before) under its default (nvcc) and under NVRTC with this tree under its default (NVRTC), each run
# from an empty TileLang cache; "kept" runs find only the header record of the run before.
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
python3 -c "import cuda.bindings.nvrtc as n; print('nvrtc', n.nvrtcVersion())" >> $OUT/host.txt 2>&1
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before kept=.,HEADER=kept before_nvrtc=.before,TILESEARCH_COMPILER=nvrtc \
  kept=.,HEADER=kept before=.before cold=. kept=.,HEADER=kept > $OUT/summary.txt 2>&1
s=$(date +%s.%N)
TILELANG_CACHE_DIR=/tmp/main_cache_kept_8 python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 progress=false storage=sqlite:////tmp/main_kept_8.db > $OUT/noop.txt 2>&1
echo "no-op rerun rc=$? wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")s" >> $OUT/summary.txt
timeout 200 python3 -m pytest -q -m gpu tests/test_compiler.py tests/test_gemm_gpu.py::test_tune_small_gemm_end_to_end -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
echo "pytest gpu rc=$?" >> $OUT/summary.txt
tail -3 $OUT/pytest_gpu.log >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt) && rm $OUT/tune_main_*.txt
cat $OUT/summary.txt
