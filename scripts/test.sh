#!/usr/bin/env bash
# Runs every test: the C++ GoogleTest suites (ctest) and the Python suite (pytest) against the
# installed package. Does all set-up itself (scripts/setup.sh). Extra arguments go to pytest;
# --full also runs the slow cases CI skips (every zoo model with every optimizer).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
VENV=${VGPU_VENV:-.venv}

build_dir=$(dirname "$(ls -d build/*/CTestTestfile.cmake | head -n 1)")
echo "== C++ tests ($build_dir)"
ctest --test-dir "$build_dir" --output-on-failure -j 2

echo "== Python tests"
# The wheel setup.sh built and installed: tests/python/test_wheel.py installs it afresh.
VGPU_WHEEL=$(ls "$PWD"/dist/tensorflow_vgpu-*.whl)
export VGPU_WHEEL
# Run outside the source tree's python/ folder so the installed package is what gets imported.
"$VENV/bin/python" -m pytest -q tests/python "$@"
