#!/usr/bin/env bash
# Creates .venv with tilesearch and everything it needs (idempotent), and records NVRTC's header
# (below). On machines without a GPU, torch==2.13.0 is the CPU build; set TORCH_SPEC to choose another torch.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
# bench: the field benchmark's peers, at the versions its recorded runs were made with (pyproject.toml)
.venv/bin/python -m pip install -q -e ".[test,postgres,bench]"
# the out-of-tree operator plugins, each registered through its own tilesearch.ops entry point
for plugin in plugins/*/; do
  .venv/bin/python -m pip install -q -e "$plugin"
done
# NVRTC's precompiled header for sm_90a, made once as a compile pool's fork server makes it, so that its
# code is recorded (tilesearch.builder.compiler.early_header): the first tune then makes the header
# beside TileLang's import instead of after it. Nothing where NVRTC does not load; a failure here
# only costs that head start.
.venv/bin/python -m tilesearch.builder.warm || true
