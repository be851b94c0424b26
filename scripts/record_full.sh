#!/usr/bin/env bash
# One GPU call's share of issue 19's full-space recordings (source scripts/gpu-host.sh first).
# Resumes the storage committed for this card (experiments/results/datasets/full/
# recordings_<gpu>_partial.sqlite.xz; a card with none starts one), records until DEADLINE
# seconds, and leaves the storage, compressed, and the log in $OUT: copy
# $OUT/recordings_<gpu>_partial.sqlite.xz back over the committed file after each call.
#
# With BEFORE=TREE (an older checkout, e.g. `git archive HEAD | tar -x -C .before`) it first runs
# that tree for BEFORE_S seconds on a copy of the same storage, so both measure the same next
# configurations, each with an empty compile cache of its own: the recording's rate before and
# after a change, on one machine, minutes apart. That copy comes back as $OUT/before.sqlite.xz.
#   BEFORE=.before BEFORE_S=100 bash scripts/record_full.sh 300
# EINSUM_ONLY=1 skips the GEMMs' pass (about 50 s to open their studies once they are complete).
set -u
deadline=${1:?usage: [BEFORE=TREE BEFORE_S=S] bash scripts/record_full.sh DEADLINE_S}
out=${OUT:?OUT must name the folder that comes back}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | grep -o 'h[0-9]00' | head -1)
kept=experiments/results/datasets/full/recordings_${gpu:-gpu}_partial.sqlite.xz
# the GEMMs: a uniform sample of 1550 and the neighbours of its 8 best; einsum-sum: every valid
# configuration (2,922 at this size), as issue 19 asks
gemms="m=1024 n=1024 k=1024; m=4096 n=14336 k=4096 layout=nt"
einsum="einsum_sum: t=8192 k=8192 h=16 d=128 dtype=bfloat16"
work=/tmp/rec
mkdir -p "$work"
if [ -f "$kept" ]; then xz -dc "$kept" > "$work/recordings.sqlite"; else rm -f "$work/recordings.sqlite"; fi
echo "card ${gpu:-unknown}: $( [ -f "$kept" ] && echo "resuming $kept" || echo "a new storage")"

one() {  # TREE STORAGE CACHE SECONDS ARGS...: one record_dataset run, stopped by SIGINT 100 s after its deadline
  (cd "$1" && PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" TILELANG_CACHE_DIR="$3" \
     timeout -s INT $(( $4 + 100 )) python3 experiments/record_dataset.py --space full --deadline "$4" --quiet \
     --storage "sqlite:///$2" --out "$work/out" "${@:5}")
}

record() {  # TREE STORAGE CACHE SECONDS LOG: the GEMMs' samples, then einsum-sum's sweep in the time left
  local began=$SECONDS rc=0
  : > "$5"
  if [ -z "${EINSUM_ONLY:-}" ]; then
    one "$1" "$2" "$3" "$4" --sample 1550 --neighbours 8 --problems "$gemms" >> "$5" 2>&1 || rc=$?
  fi
  local left=$(( $4 - (SECONDS - began) ))
  if [ "$left" -gt 30 ]; then
    one "$1" "$2" "$3" "$left" --problems "$einsum" >> "$5" 2>&1 || rc=$?
  fi
  echo "rc=$rc $(grep -c . "$5") log lines; $(grep -E '^ *(gemm|einsum)_' "$5" | tr -s ' ' | paste -sd'|')"
}

if [ -n "${BEFORE:-}" ]; then
  cp "$work/recordings.sqlite" "$work/before.sqlite" 2>/dev/null || rm -f "$work/before.sqlite"
  echo "before ($BEFORE, ${BEFORE_S:-100} s): $(record "$BEFORE" "$work/before.sqlite" /tmp/cache_before "${BEFORE_S:-100}" "$out/record_before.log")"
  xz -T0 -c "$work/before.sqlite" > "$out/before.sqlite.xz"
fi
echo "after (., $deadline s): $(record . "$work/recordings.sqlite" /tmp/cache_after "$deadline" "$out/record.log")"
xz -T0 -c "$work/recordings.sqlite" > "$out/$(basename "$kept")"
ls -la "$out"
