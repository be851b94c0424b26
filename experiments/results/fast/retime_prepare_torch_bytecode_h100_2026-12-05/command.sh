# Run as `bash experiments/results/fast/retime_prepare_torch_bytecode_h100_2026-12-05/command.sh`.
# 2026-12-05, second call: why `import torch` takes 3.6 s on the H100 host (4.4-4.8 s for `import tilelang`, against
# about 1 s for torch on the 2-core CPU machine): whether the host's torch has bytecode. Then README's main
# command, before (.before = e239f5a) and after (. = c2f5106 plus this file), first on the host as given (one pair),
# then with torch's bytecode compiled (three pairs), each run on a fresh storage and an empty TileLang cache holding
# only NVRTC's header record (the cold first run makes it), and a timeline of after.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary.txt
TD=$(python3 -c "import os, importlib.util as u; print(os.path.dirname(u.find_spec('torch').origin))")
echo "torch at $TD; writable: $([ -w "$TD" ] && echo yes || echo no); .py files: $(find "$TD" -name '*.py' | wc -l); .pyc files: $(find "$TD" -name '*.pyc' | wc -l); PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}; python3 $(python3 -c 'import sys; print(sys.version.split()[0], sys.flags.dont_write_bytecode, sys.pycache_prefix)')" >> $OUT/summary.txt
for i in 1 2; do python3 -c "import time; t = time.time(); import torch; print(f'as given: import torch {time.time() - t:.2f} s')" >> $OUT/summary.txt 2>&1; done
export CACHE=fresh
mkdir -p $OUT/given && OUT=$OUT/given bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept >> $OUT/summary.txt 2>&1
rm -rf /tmp/main_*.db /tmp/main_cache_*
s=$(date +%s)
if [ -w "$TD" ]; then python3 -m compileall -q -j 0 "$TD" > /dev/null 2>&1; where=in-place
else export PYTHONPYCACHEPREFIX=/tmp/pyc; python3 -m compileall -q -j 0 "$TD" > /dev/null 2>&1; where=/tmp/pyc; fi
echo "torch's bytecode compiled ($where) in $(( $(date +%s) - s )) s; .pyc files now: $(find "$TD" /tmp/pyc -name '*.pyc' 2>/dev/null | wc -l)" >> $OUT/summary.txt
for i in 1 2; do python3 -c "import time; t = time.time(); import torch; print(f'compiled: import torch {time.time() - t:.2f} s')" >> $OUT/summary.txt 2>&1; done
python3 -c "import time; t = time.time(); import tilelang; print(f'compiled: import tilelang {time.time() - t:.2f} s')" >> $OUT/summary.txt 2>&1
# the header record the first runs made, kept for the next (time_main_command.sh keeps it within one call only)
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept >> $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
header=$(ls /tmp/main_cache_after_7/nvrtc/tilesearch-header-*.json | head -1)
rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
TILELANG_CACHE_DIR=/tmp/tl_cache timeout 120 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 k=8192 \
  dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt given/tune_main_*.txt) timeline.txt tl && rm -rf $OUT/tune_main_*.txt $OUT/given $OUT/tl
grep -A14 "first of each event" $OUT/timeline.txt | head -16 >> $OUT/summary.txt
grep -E "run [0-9]+:|torch|tilelang|after" $OUT/summary.txt
