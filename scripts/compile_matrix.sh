#!/usr/bin/env bash
# The CPU compile matrix (scripts/compile_matrix.py): every unit that includes Eigen, oneDNN or
# TensorFlow's C++ headers compiled (-fsyntax-only) for Sapphire Rapids, Granite Rapids, Zen 4,
# x86-64-v3 and x86-64-v2, each configured through cmake/CpuTarget.cmake as a user's build is.
# Sets up .venv first (scripts/setup.sh --env-only). Arguments go to compile_matrix.py
# (--targets a,b --jobs N). About 2.5 minutes a target on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VGPU_VENV:-.venv}
./scripts/setup.sh --env-only
PATH="$PWD/$VENV/bin:$PATH" exec "$VENV/bin/python" scripts/compile_matrix.py "$@"
