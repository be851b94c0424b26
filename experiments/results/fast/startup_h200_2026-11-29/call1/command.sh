set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
export TILESEARCH_TEST_GPU=1
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_compiler.py tests/test_gemm_gpu.py -x > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?" ; tail -3 $OUT/pytest_gpu.log
ARGS="tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false"
run() { label=$1; shift; export TILELANG_CACHE_DIR=$1; shift
  env "$@" python scripts/timeline_probe.py out=$OUT/$label -- $ARGS storage=sqlite:////tmp/tl_$label.db > $OUT/$label.txt 2>&1
  echo "$label rc=$? $(grep -m1 -o 'first measured trial after [0-9.]* s; runner busy [0-9]*%' $OUT/$label.txt) $(grep -m1 -E '^ *[0-9]+ +chosen ' $OUT/$label.txt)"; }
run nvrtc_cold /tmp/cacheA TILESEARCH_COMPILER=nvrtc
run nvcc_cold /tmp/cacheB TILESEARCH_COMPILER=nvcc
run nvrtc_warm /tmp/cacheA TILESEARCH_COMPILER=nvrtc
for l in nvrtc_cold nvcc_cold nvrtc_warm; do echo "== $l"; sed -n '/^first of each event/,/^per second/p' $OUT/$l.txt; done
