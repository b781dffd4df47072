#!/usr/bin/env bash
# The CUDA executor's compile check (docs/cuda.md); needs no GPU. Installs NVIDIA's pinned CUDA
# 13.0 packages (nvcc, runtime, CCCL, cuBLAS, cuDNN 9) into a virtual environment of their own
# (.venv-cuda, or VGPU_CUDA_VENV if it already has them), configures build-cuda/ with
# VGPU_CUDA=ON and builds vgpu-server (with the "cuda" executor) and vgpu_cuda_tests.
#   scripts/build_cuda.sh            against TensorFlow's Eigen from the project's Python
#                                    (VGPU_PYTHON, default .venv/bin/python)
#   scripts/build_cuda.sh --kit      standalone-only, from .device-kit/ as the GPU machine
#                                    builds (scripts/prepare_device_kit.sh fills it)
# Environment: VGPU_CUDA_VENV, VGPU_PYTHON, VGPU_CUDA_BUILD_DIR (build-cuda), VGPU_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=tensorflow
[ "${1:-}" = "--kit" ] && MODE=kit
CUDA_VENV=${VGPU_CUDA_VENV:-.venv-cuda}
BUILD=${VGPU_CUDA_BUILD_DIR:-build-cuda}
JOBS=${VGPU_JOBS:-$(nproc)}
CUDA_PACKAGES=(
  "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-cccl==13.0.*"
  "nvidia-cuda-crt==13.0.*" "nvidia-nvvm==13.0.*"   # nvvm must match nvcc, or ptxas fails
  "nvidia-cublas==13.0.*" "nvidia-cudnn-cu13")

site_nvidia() {
  "$1/bin/python" -c 'import nvidia, os; print(os.path.abspath(list(nvidia.__path__)[0]))'
}
if [ ! -x "$CUDA_VENV/bin/python" ] || \
   [ ! -x "$(site_nvidia "$CUDA_VENV" 2>/dev/null)/cu13/bin/nvcc" ]; then
  echo "build_cuda: installing the CUDA 13.0 packages into $CUDA_VENV"
  [ -x "$CUDA_VENV/bin/python" ] || python3 -m venv "$CUDA_VENV"
  "$CUDA_VENV/bin/python" -m pip --disable-pip-version-check -q install "${CUDA_PACKAGES[@]}"
fi
NVIDIA=$(site_nvidia "$CUDA_VENV")
echo "build_cuda: NVIDIA packages at $NVIDIA"

ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DVGPU_CUDA=ON -DVGPU_CUDA_PACKAGES="$NVIDIA"
      -DVGPU_BUILD_TESTS=ON -DVGPU_BUILD_STANDALONE_SERVER=ON)
if [ "$MODE" = kit ]; then
  KIT=$(pwd)/.device-kit
  [ -d "$KIT/eigen" ] || { echo "build_cuda: no $KIT (run scripts/prepare_device_kit.sh)" >&2; exit 1; }
  ARGS+=(-DVGPU_STANDALONE_ONLY=ON -DVGPU_ONEDNN=OFF -DVGPU_EIGEN_INCLUDE_DIR="$KIT/eigen"
         -DVGPU_ABSEIL_ROOT="$KIT/abseil" -DCMAKE_PREFIX_PATH="$KIT/gtest" -DGTEST_ROOT="$KIT/gtest")
else
  PY=${VGPU_PYTHON:-.venv/bin/python}
  PY=$(command -v "$PY" || echo "$PY")
  case "$PY" in /*) ;; *) PY="$PWD/$PY" ;; esac  # CMake needs an absolute path
  ARGS+=(-DPython_EXECUTABLE="$PY" -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)")
fi
cmake -S . -B "$BUILD" "${ARGS[@]}"
nice cmake --build "$BUILD" -j "$JOBS" --target vgpu_server_main vgpu_cuda_tests
echo "build_cuda: OK: $BUILD/plugin/vgpu-server (executors: $("$BUILD/plugin/vgpu-server" --list_executors | cut -f1 | tr '\n' ' '))"
echo "build_cuda: OK: $BUILD/tests/cuda/vgpu_cuda_tests"
