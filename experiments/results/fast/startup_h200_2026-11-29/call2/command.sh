set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
ARGS="tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false"
i=0; root=$PWD
run() { label=$1; tree=$2; shift 2; i=$((i+1)); export TILELANG_CACHE_DIR=/tmp/cache_$i
  s=$(date +%s.%N)
  (cd $tree && env "$@" PYTHONPATH=$root/$tree:$PYTHONPATH python $root/scripts/timeline_probe.py out=$OUT/${i}_$label -- $ARGS storage=sqlite:////tmp/tl_$i.db > $OUT/${i}_$label.txt 2>&1)
  w=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")
  echo "$i $label wall=$w $(grep -m1 -o 'first measured trial after [0-9.]* s; runner busy [0-9]*%' $OUT/${i}_$label.txt) $(grep -m1 -o '([0-9.]* s of compilation' $OUT/${i}_$label.txt) $(grep -m1 -E '^ *[0-9]+ +chosen ' $OUT/${i}_$label.txt | awk '{print $2, $6, $7, $8}')"; }
run before_nvrtc .before TILESEARCH_COMPILER=nvrtc
run after_nvrtc . TILESEARCH_COMPILER=nvrtc
run after_nvrtc . TILESEARCH_COMPILER=nvrtc
run before_nvrtc .before TILESEARCH_COMPILER=nvrtc
run after_nvcc . TILESEARCH_COMPILER=nvcc
for f in $OUT/*_after_nvrtc.txt; do echo "== $f"; sed -n '/^first of each event/,/^per second/p' $f; grep -E "^(database|wait for|measure|final re-time|propose) " $f; done
grep -h "^tilesearch from" $OUT/*.txt
