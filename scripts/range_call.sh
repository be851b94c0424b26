#!/usr/bin/env bash
# One device call of the range check (issue 14): the pairs of PAIRS (comma-separated, e.g.
# 4096x4096,14336x4096), each on a GPU of its own, in a storage of its own resumed from
# FROM/PAIR.db.xz (FROM: default .deploy; a fresh storage where that is missing); the storages and
# logs come back under $OUT. More pairs than GPUs: a GPU takes the next waiting pair as soon as its
# pair ends, so a pair that only finishes its certification leaves its GPU to a pair that starts.
# Every pair stops LIMIT_S seconds after the call started (its own limit is what is left then); a
# pair that would start with less than a minute left does not start. A committed FROM
# (experiments/results/...) travels with the tree, so nothing but .bundle need be carried.
# EXTRA: more key=value options of experiments/deploy_check.py (e.g. refine=6), for every pair; a
# pair's own follow it after "+" (14336x4096+sizes=9), and name its storage and log apart.
# Each storage is also copied to $OUT once a minute while its pair runs (a file copy checked by
# SQLite): a call cut short (its limit lowered to the device time left) still returns what it
# measured. To go on in a later call, copy the returned PAIR.db.xz files into FROM (.deploy); a
# fresh machine starts each pair whose FROM/PAIR.db.xz is missing from an empty storage, and says so.
# Usage: bash scripts/range_call.sh LIMIT_S PAIRS NAME [FROM [EXTRA...]]
pairs=$2; name=$3; deadline=$((SECONDS + $1)); from=${4:-.deploy}; shift $(($# < 4 ? $# : 4)); extra=("$@")
source scripts/gpu-host.sh
host_gpus=$(nvidia-smi -L | wc -l)
gpus=${GPUS:-$host_gpus}  # GPUS=3 on a 4-GPU host leaves the fourth (and its cores) free
share=$(( $(nproc) / host_gpus ))  # each pair runs on its GPU's share of the cores
slug() { local e=${1//+/_}; echo "${e//=/}"; }  # a pair's entry as it names its storage and log
run_pair() {  # entry gpu; entry: PAIR[+key=value...]
  local entry=$1 pair=${1%%+*} own=() w
  [ "$entry" != "$pair" ] && IFS=+ read -r -a own <<< "${entry#*+}"
  entry=$(slug "$entry"); w=/tmp/dw_$entry
  mkdir -p "$w"
  if [ ! -f "$w/.unpacked" ]; then
    rm -f "$w"/deploy.db*
    if [ -f "$from/$pair.db.xz" ]; then xz -dc "$from/$pair.db.xz" > "$w/deploy.db"
    else echo "$entry: no $from/$pair.db.xz, starting from an empty storage" | tee -a "$OUT/${name}_$entry.log"; fi
    touch "$w/.unpacked"
  fi
  # trials left RUNNING by an earlier call's killed process (another host: its PID tells nothing);
  # safe because one process uses this storage
  [ -f "$w/deploy.db" ] && python3 -c "
import sqlite3; c=sqlite3.connect('$w/deploy.db')
print('stale trials failed:', c.execute(\"update trials set state='FAIL', datetime_complete=datetime('now') where state='RUNNING'\").rowcount); c.commit()"
  # its sleep is killed with it: a sleep left behind would hold the call's output open for up to a minute
  ( trap 'kill $! 2>/dev/null; exit' TERM; while :; do sleep "${CHECKPOINT_S:-60}" & wait $!; checkpoint "$w" "$entry"; done ) &
  local saver=$! left=$((deadline - SECONDS))
  CUDA_VISIBLE_DEVICES=$2 taskset -c $(($2 * share))-$(($2 * share + share - 1)) timeout -k 5 -s INT "$left" python experiments/deploy_check.py parts=b sizes=7 pairs="$pair" \
    work="$w" out="$w/out" "${extra[@]}" "${own[@]}" >> "$OUT/${name}_$entry.log" 2>&1
  echo "rc=$?" >> "$OUT/${name}_$entry.log"
  kill "$saver" 2>/dev/null; wait "$saver" 2>/dev/null
  checkpoint "$w" "$entry"
}
checkpoint() {  # dir entry: a copy of the storage, checked whole, written to $OUT whole or not at all
  # The live file is only read (cp), never opened by SQLite from a second process: on the GPU host
  # an sqlite3 backup beside the running study made every pair's next query fail with "disk I/O
  # error" (a WAL database shared across processes there). A copy taken mid-commit is recovered
  # from its write-ahead log like a crash; one that fails integrity_check is dropped (the last
  # good one stays).
  local db=$1/deploy.db copy=$1/copy.$BASHPID.db part=$OUT/.$2.$BASHPID.db.xz  # saver's and final one's apart
  [ -f "$db" ] || return 0
  cp "$db" "$copy" && { [ ! -f "$db-wal" ] || cp "$db-wal" "$copy-wal"; } && python3 -c "
import sqlite3, sys; c=sqlite3.connect('$copy')
ok=c.execute('pragma integrity_check').fetchone()[0] == 'ok'
ok and c.execute('pragma journal_mode=delete'); c.close(); sys.exit(0 if ok else 1)" \
    && xz -T4 -c "$copy" > "$part" && mv "$part" "$OUT/$2.db.xz"
  rm -f "$copy" "$copy-wal" "$copy-shm" "$part"
}
gpu_loop() {  # gpu: runs waiting pairs, each claimed once (mkdir is atomic), until none is left
  local i=0 entry
  for entry in ${pairs//,/ }; do
    i=$((i + 1))
    mkdir "$claims/$i" 2>/dev/null || continue
    if [ $((deadline - SECONDS)) -lt 60 ]; then
      echo "$entry: not started, under a minute of the call left" | tee -a "$OUT/${name}_$(slug "$entry").log"
      continue
    fi
    run_pair "$entry" "$1"
  done
}
claims=$(mktemp -d)
for ((g = 0; g < gpus; g++)); do gpu_loop "$g" & done
wait
for entry in ${pairs//,/ }; do
  entry=$(slug "$entry")
  echo "== $entry"; grep -v "Warning\|kernel_cache" "$OUT/${name}_$entry.log" | tail -14
done
