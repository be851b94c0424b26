#!/usr/bin/env bash
# Source on the GPU host (no network) before running experiments there: unpacks the bundle made
# by scripts/make-bundle.sh into /tmp/site, then installs tilesearch and the operator plugins
# under plugins/ from the working tree without dependencies, so the `tilesearch` command and
# every operator's entry point exist. The unpacked sources are byte-compiled once (marked by
# /tmp/site/.compiled), as an installed environment's are: without their .pyc files every process
# compiled them again, 2.15 s of a profiled no-op rerun of tune. Compile errors are ignored (files
# for other Python versions that nothing imports).
#   source scripts/gpu-host.sh
[ -d /tmp/site/tilelang ] || { mkdir -p /tmp/site && tar -C /tmp/site -xJf .bundle/bundle.tar.xz; }
[ -f /tmp/site/.compiled ] || { python3 -m compileall -q -j 0 /tmp/site >/dev/null 2>&1; touch /tmp/site/.compiled; }
# The host's own torch has no bytecode either (2,141 .py files, no .pyc; PYTHONDONTWRITEBYTECODE=1, so no import
# writes any): each process that imports it (the compile pool's fork server, the measuring worker, the spares)
# compiled its sources again, `import torch` 4.6-7.6 s against 2.1-2.4 s with bytecode, as pip leaves an install
# (2026-12-05, experiments/results/fast/retime_prepare_torch_bytecode_h100_2026-12-05). Compiled once, 3 s on 16 cores.
torch_dir=$(python3 -c "import os, importlib.util as u; print(os.path.dirname(u.find_spec('torch').origin))" 2>/dev/null)
if [ -n "$torch_dir" ] && [ -w "$torch_dir" ] && [ ! -f /tmp/site/.torch-compiled ]; then
  python3 -m compileall -q -j 0 "$torch_dir" >/dev/null 2>&1; touch /tmp/site/.torch-compiled
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for project in . plugins/*/; do
  [ -f "$project/pyproject.toml" ] || continue
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e "$project" >/dev/null 2>&1 \
    || echo "gpu-host.sh: pip install -e $project failed; its entry points may be missing" >&2
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
