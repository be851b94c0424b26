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
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for project in . plugins/*/; do
  [ -f "$project/pyproject.toml" ] || continue
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e "$project" >/dev/null 2>&1 \
    || echo "gpu-host.sh: pip install -e $project failed; its entry points may be missing" >&2
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
