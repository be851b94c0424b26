set -u
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
ARGS="tune op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false"
i=0
run() { label=$1; shift; i=$((i+1)); export TILELANG_CACHE_DIR=/tmp/cache_$i
  s=$(date +%s.%N)
  TILESEARCH_COMPILER=nvrtc python scripts/timeline_probe.py out=$OUT/${i}_$label "$@" -- $ARGS storage=sqlite:////tmp/tl_$i.db > $OUT/${i}_$label.txt 2>&1
  w=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")
  echo "$i $label wall=$w $(grep -m1 -o 'first measured trial after [0-9.]* s; runner busy [0-9]*%' $OUT/${i}_$label.txt) $(grep -m1 -o '([0-9.]* s of compilation' $OUT/${i}_$label.txt) $(grep -m1 -E '^ *[0-9]+ +chosen ' $OUT/${i}_$label.txt | awk '{print $2, $6, $7, $8}')"; }
run base
run round2 round=2
run deeper6 deeper=6
run base
run round2 round=2
run deeper6 deeper=6
