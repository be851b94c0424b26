#!/usr/bin/env bash
# Times README's main command on the GPU host, alternating source trees, each run on a fresh
# storage, with tune's verbose breakdown kept per run (fast-tuning issue). Source
# scripts/gpu-host.sh first. Each argument is LABEL=TREE: TREE is a checkout of tilesearch (the
# working tree ".", or an older commit unpacked with `git archive COMMIT | tar -x -C .before`),
# run from inside it, its own package first on the path (a tree it would not import is skipped).
# TREE may be followed by ,NAME=VALUE settings of the environment for that run alone
# (nvrtc=.,TILESEARCH_COMPILER=nvrtc).
# The first run meets an empty compile cache on a fresh machine; later ones find most
# configurations compiled. Writes $OUT/tune_main_LABEL_I.txt (its storage stays in /tmp: at most 8
# files come back from the GPU host)
# and prints one line per run.
#   bash scripts/time_main_command.sh after=. before=.before after=. before=.before
#   bash scripts/time_main_command.sh nvcc=. nvrtc=.,TILESEARCH_COMPILER=nvrtc
set -u
out=${OUT:-/tmp}
i=0
for spec in "$@"; do
  i=$((i + 1))
  label=${spec%%=*}
  rest=${spec#*=}
  IFS=, read -r -a parts <<< "$rest"
  tree=$(cd "${parts[0]}" && pwd)
  settings=("${parts[@]:1}")
  log="$out/tune_main_${label}_$i.txt"
  # run from inside the tree: the working directory comes first on python's path, so a tree run
  # from the repository root would import the root's tilesearch (as the first pairs of runs did)
  got=$(cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import tilesearch; print(tilesearch.__file__)")
  case "$got" in
    "$tree"/*) ;;
    *) echo "$label run $i: skipped: $tree would import tilesearch from ${got:-nowhere}" >&2; continue ;;
  esac
  start=$(date +%s.%N)
  (cd "$tree" && env ${settings[@]+"${settings[@]}"} PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 -m tilesearch.cli tune op=gemm m=8192 n=8192 k=8192 \
    dtype=float16 strategy=tpe trials=48 verbose=true progress=false "storage=sqlite:////tmp/main_${label}_$i.db") \
    > "$log" 2>&1
  rc=$?
  wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  echo "$label run $i: rc=$rc wall=${wall}s $(grep -m1 -o 'first measured trial after [0-9.]* s; runner busy [0-9]*%' "$log")" \
       "$(grep -m1 -o 'statuses: .*' "$log")"
  grep -E '^(runner start|propose|database|wait for|measure|final re-time|worker: (time|warm))' "$log" | tr -s ' ' | paste -sd';' 
  grep -m1 -E '^ *[0-9]+ +chosen ' "$log" || tail -5 "$log"
done
