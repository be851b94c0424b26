#!/usr/bin/env bash
# Source on the GPU host (no network) before running experiments there: unpacks the bundle made
# by ../shared/gpu-host/make-bundle.sh into /tmp/site and installs tilesearch without
# dependencies, so the `tilesearch` command and the operator entry points exist.
#   source scripts/gpu-host.sh
[ -d /tmp/site/tilelang ] || { mkdir -p /tmp/site && tar -C /tmp/site -xJf .bundle/bundle.tar.xz; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 \
  || echo "gpu-host.sh: pip install -e . failed; entry points may be missing" >&2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
