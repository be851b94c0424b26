#!/usr/bin/env bash
# Times README's main command on the GPU host, alternating source trees, each run on a fresh
# storage, with tune's verbose breakdown kept per run (fast-tuning issue). Source
# scripts/gpu-host.sh first. Each argument is LABEL=TREE: TREE is a checkout of tilesearch (the
# working tree ".", or an older commit unpacked with `git archive COMMIT | tar -x -C .before`),
# run from inside it, its own package first on the path (a tree it would not import is skipped).
# TREE may be followed by ,NAME=VALUE settings of the environment for that run alone
# (nvcc=.,TILESEARCH_COMPILER=nvcc).
# The first run meets an empty compile cache on a fresh machine; later ones find most
# configurations compiled, unless CACHE=fresh: then each run gets an empty TileLang cache folder of
# its own, as on a fresh machine, and a run whose settings include HEADER=kept finds in it only NVRTC's
# header record (compiler.header_file) that the last run before it made, as on a machine that has
# tuned another problem before. Writes $OUT/tune_main_LABEL_I.txt (its storage stays in /tmp: at most 8
# files come back from the GPU host)
# and prints one line per run. With RERUN=1 each run is followed by a no-op rerun of itself (the same storage
# and cache, nothing new to measure), written to $OUT/rerun_main_LABEL_I.txt.
#   bash scripts/time_main_command.sh after=. before=.before after=. before=.before
#   bash scripts/time_main_command.sh nvrtc=. nvcc=.,TILESEARCH_COMPILER=nvcc
#   CACHE=fresh bash scripts/time_main_command.sh cold=. kept=.,HEADER=kept before=.before
set -u
out=${OUT:-/tmp}
# README's main command from inside TREE ($1), its own package first on the path, on storage $2,
# with the run's settings of the environment (the caller's array `settings`), stopped after $3 s if given
tune() {
  (cd "$1" && timeout "${3:-0}" env ${settings[@]+"${settings[@]}"} PYTHONPATH="$1${PYTHONPATH:+:$PYTHONPATH}" python3 -m tilesearch.cli tune \
    op=gemm m=8192 n=8192 k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false "storage=sqlite:///$2")
}
since() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }
i=0
header=""
for spec in "$@"; do
  i=$((i + 1))
  label=${spec%%=*}
  rest=${spec#*=}
  IFS=, read -r -a parts <<< "$rest"
  tree=$(cd "${parts[0]}" && pwd)
  settings=()
  keep=""
  for setting in "${parts[@]:1}"; do
    if [ "$setting" = HEADER=kept ]; then keep=1; else settings+=("$setting"); fi
  done
  if [ "${CACHE:-}" = fresh ]; then
    cache=/tmp/main_cache_${label}_$i
    rm -rf "$cache" && mkdir -p "$cache/nvrtc"
    if [ -n "$keep" ]; then
      if [ -z "$header" ]; then echo "$label run $i: no header record made by an earlier run to keep" >&2; continue; fi
      cp "$header" "$cache/nvrtc/"
    fi
    settings+=("TILELANG_CACHE_DIR=$cache")
  fi
  log="$out/tune_main_${label}_$i.txt"
  # run from inside the tree: the working directory comes first on python's path, so a tree run
  # from the repository root would import the root's tilesearch (as the first pairs of runs did)
  got=$(cd "$tree" && PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import tilesearch; print(tilesearch.__file__)")
  case "$got" in
    "$tree"/*) ;;
    *) echo "$label run $i: skipped: $tree would import tilesearch from ${got:-nowhere}" >&2; continue ;;
  esac
  start=$(date +%s.%N)
  tune "$tree" "/tmp/main_${label}_$i.db" > "$log" 2>&1
  rc=$?
  wall=$(since "$start")
  echo "$label run $i: rc=$rc wall=${wall}s $(grep -m1 -o 'first measured trial after [0-9.]* s[^;]*; runner busy [0-9]*%' "$log")" \
       "$(grep -m1 -o 'statuses: .*' "$log") $(grep -m1 -o '[0-9.]* s wall ([0-9.]* s of compilation' "$log")"
  if [ "${CACHE:-}" = fresh ]; then
    made=$(ls "$cache"/nvrtc/tilesearch-header-*.json 2>/dev/null | head -1)
    [ -n "$made" ] && header=$made
  fi
  grep -E '^(runner start|propose|database|wait for|measure|final re-time|worker: (time|warm))' "$log" | tr -s ' ' | paste -sd';' 
  grep -m1 -E '^ *[0-9]+ +chosen ' "$log" || tail -5 "$log"
  if [ "${RERUN:-}" = 1 ] && [ $rc = 0 ]; then  # the same command again: nothing new to measure
    start=$(date +%s.%N)
    tune "$tree" "/tmp/main_${label}_$i.db" 10 > "$out/rerun_main_${label}_$i.txt" 2>&1
    echo "$label run $i, no-op rerun: rc=$? wall=$(since "$start")s $(grep -m1 -o 'measured now: [0-9]*' "$out/rerun_main_${label}_$i.txt")"
  fi
done
