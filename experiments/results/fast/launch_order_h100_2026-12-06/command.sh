# Run as `bash experiments/results/fast/launch_order_h100_2026-12-06/command.sh` on the GPU host.
# 2026-12-06, first call:
# 1. GPU tests that load and run compiled kernels: the host library's C code is compiled by gcc since cbbec0b,
#    which so far ran only on the CPU machine.
# 2. README's main command, before (.before = 4baeb93) and after (. = 4868fe8: each round launched cheapest to
#    compile first), alternating, each on a fresh storage and an empty TileLang cache holding only NVRTC's header record.
# 3. A timeline of after, and every run's trials (configuration, compile seconds) for the compile-cost fit on the
#    loaded host.
set -u
start=$(date +%s)
source scripts/gpu-host.sh > $OUT/host.txt 2>&1
echo "set up after $(( $(date +%s) - start )) s" > $OUT/summary.txt
timeout 170 python3 -m pytest -q -m gpu -n 8 -p no:cacheprovider tests/test_compiler.py tests/test_deploy_export.py \
  "tests/test_gemm_gpu.py::test_tune_small_gemm_end_to_end" > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? after $(( $(date +%s) - start )) s: $(tail -1 $OUT/pytest_gpu.log)" >> $OUT/summary.txt
export CACHE=fresh
bash scripts/time_main_command.sh cold=. before=.before,HEADER=kept after=.,HEADER=kept before=.before,HEADER=kept \
  after=.,HEADER=kept before=.before,HEADER=kept after=.,HEADER=kept >> $OUT/summary.txt 2>&1
echo "runs done after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
python3 - > $OUT/trials.jsonl <<'PY'
import glob, json, optuna
optuna.logging.set_verbosity(optuna.logging.WARNING)
for path in sorted(glob.glob("/tmp/main_*.db")):
    url = f"sqlite:///{path}"
    for s in optuna.get_all_study_summaries(url):
        if "#" in s.study_name:
            continue
        for t in optuna.load_study(study_name=s.study_name, storage=url).trials:
            a = t.user_attrs
            print(json.dumps({"db": path, "number": t.number, "config": a.get("config"), "compile_s": a.get("compile_s"),
                              "status": a.get("status"), "latency_ms": a.get("latency_ms")}))
PY
if [ $(( $(date +%s) - start )) -lt 480 ]; then
  header=$(ls /tmp/main_cache_after_7/nvrtc/tilesearch-header-*.json | head -1)
  rm -rf /tmp/tl_cache && mkdir -p /tmp/tl_cache/nvrtc && cp "$header" /tmp/tl_cache/nvrtc/
  TILELANG_CACHE_DIR=/tmp/tl_cache timeout 90 python3 scripts/timeline_probe.py out=$OUT/tl -- tune op=gemm m=8192 n=8192 \
    k=8192 dtype=float16 strategy=tpe trials=48 verbose=true progress=false storage=sqlite:////tmp/tl.db > $OUT/timeline.txt 2>&1
  echo "timeline rc=$? after $(( $(date +%s) - start )) s" >> $OUT/summary.txt
fi
tar -C $OUT -czf $OUT/runs.tgz $(cd $OUT && ls tune_main_*.txt timeline.txt tl 2>/dev/null) && rm -rf $OUT/tune_main_*.txt $OUT/tl
cat $OUT/summary.txt
