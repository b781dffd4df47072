#!/usr/bin/env bash
# Prepares a development environment from scratch, idempotently: system packages for the C++
# tests (GoogleTest, ccache, ninja; Abseil's static libraries for a standalone vgpu-server), a
# virtual environment in .venv with TensorFlow, oneDNN and the build tools, and tensorflow-vgpu
# built as a wheel (scripts/build_wheel.sh, C++ tests built in the same build folder) and
# installed into it: the from-source install is the wheel a user would install.
# Used by scripts/test.sh and scripts/run_example.sh; safe to run again.
#   --env-only   only the system packages and the virtual environment (scripts/build_wheel.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VGPU_VENV:-.venv}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_apt=()
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
# vgpu-server links the system's Abseil statically instead of TensorFlow's (CMakeLists.txt).
[ -f /usr/include/absl/base/config.h ] || need_apt+=(libabsl-dev)
command -v ccache >/dev/null || need_apt+=(ccache)
command -v ninja >/dev/null || need_apt+=(ninja-build)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# Build tools and runtime dependencies (the TensorFlow wheel comes from the package index).
# oneDNN (GNU OpenMP build) for the CPU executor's convolutions and matrix products: the wheels
# put libdnnl.so.3, its headers and its CMake package into the venv (cmake/OneDNN.cmake).
# xprof (the converter behind TensorBoard's Profile tab) for the profiler's tests.
"${PIP[@]}" install "tensorflow-cpu==2.21.*" "absl-py>=2.0" "prometheus-client>=0.17" "pytest>=8" \
  "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja matplotlib auditwheel \
  "onednn-cpu-gomp==2023.2.*" "onednn-devel-cpu-gomp==2023.2.*" "xprof==2.24.*"

# The wire-format fuzz test uses atheris when it installs here (otherwise it is skipped).
"${PIP[@]}" install atheris >/dev/null 2>&1 || echo "setup: atheris unavailable; the fuzz test will be skipped"

[ "${1:-}" = "--env-only" ] && exit 0

echo "setup: building and installing tensorflow-vgpu"
VGPU_ENV_READY=1 ./scripts/build_wheel.sh --tests
"${PIP[@]}" install --no-deps --force-reinstall dist/tensorflow_vgpu-*.whl
