#!/usr/bin/env bash
# Packs what an air-gapped GPU host lacks into one file, .bundle/bundle.tar.xz, which
# scripts/gpu-host.sh unpacks there. The host (x86-64, Python 3.12) has its own torch, CUDA,
# numpy, setuptools and the like; it lacks TileLang (with the TVM it bundles), Optuna, XGBoost
# and their dependencies, pinned here to the versions the test suite runs with.
#
#   usage: bash scripts/make-bundle.sh [EXTRA_REQUIREMENT ...]     (needs network; ~2 minutes)
#
# The operator plugins under plugins/ are installed on the host from the working tree by
# scripts/gpu-host.sh; their third-party dependencies (any beyond tilesearch) are packed here.
# The file must stay under 60 MB: it travels with the working tree, 64 MiB in all.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${BUNDLE_DIR:-.bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=${PYTHON:-python3}
reqs=(
  "tilelang==0.1.15"
  "apache-tvm-ffi>=0.1.11,<0.1.13"
  "z3-solver>=4.13.0,<4.15.5"
  "torch-c-dlpack-ext==0.1.5"
  "xgboost-cpu==3.4.1"
  "optuna==5.0.0"
  "alembic" "sqlalchemy" "colorlog" "mako" "greenlet"
  "cuda-bindings==13.*"  # TILESEARCH_COMPILER=nvrtc; the host's CUDA 13 toolkit has libnvrtc
)
# each plugin's declared dependencies, tilesearch itself left out
for pyproject in plugins/*/pyproject.toml; do
  [ -f "$pyproject" ] || continue
  while IFS= read -r dep; do [ -n "$dep" ] && reqs+=("$dep"); done < <("$python" - "$pyproject" <<'PY'
import re, sys
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
deps = tomllib.load(open(sys.argv[1], "rb")).get("project", {}).get("dependencies", [])
print("\n".join(d for d in deps if re.split(r"[<>=!~;\[ ]", d)[0].strip().lower() != "tilesearch"))
PY
)
done
reqs+=("$@")
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for r in "${reqs[@]}"; do
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${plat[@]}" -d "$work/whl" "$r" 2>&1 | grep -v '^WARNING' || true
  ls "$work"/whl/*.whl >/dev/null 2>&1 || { echo "make-bundle.sh: could not download $r" >&2; exit 1; }
done
mkdir -p "$work/site"
for w in "$work"/whl/*.whl; do (cd "$work/site" && "$python" -m zipfile -e "$w" .); done
# not needed at run time: the z3 command-line binary and headers
rm -rf "$work"/site/z3_solver-*.data/data/bin "$work"/site/z3/include
mkdir -p "$out"
tar -C "$work/site" -cf - . | xz -T0 -9 > "$out/bundle.tar.xz.part"
mv "$out/bundle.tar.xz.part" "$out/bundle.tar.xz"
size=$(stat -c %s "$out/bundle.tar.xz")
echo "$out/bundle.tar.xz: $((size / 1048576)) MiB, $(ls "$work"/whl | wc -l) wheels"
if [ "$size" -gt 62914560 ]; then echo "make-bundle.sh: the bundle is over 60 MB: trim it" >&2; exit 1; fi
