# 2026-12-04, at 30167ff: a sanity call after the no-GPU and pool-close changes (GPU budget nearly spent):
# a quick 8-trial tune of 1024^3 float16 from an empty cache, its no-op rerun, and the GPU tests of
# tests/test_driver.py and tests/test_faults.py under a 100 s limit (one passed, none failed, before the limit).
set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
cd /tmp && timeout 90 python3 -m tilesearch.cli tune op=gemm m=1024 n=1024 k=1024 dtype=float16 trials=8 progress=false storage=sqlite:////tmp/q.db > $OUT/quick_tune.txt 2>&1
timeout 20 python3 -m tilesearch.cli tune op=gemm m=1024 n=1024 k=1024 dtype=float16 trials=8 progress=false storage=sqlite:////tmp/q.db > $OUT/quick_noop.txt 2>&1
cd - > /dev/null
timeout 100 python3 -m pytest -q -m gpu tests/test_driver.py tests/test_faults.py -p no:cacheprovider > $OUT/pytest_gpu.log 2>&1
