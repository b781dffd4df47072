#!/usr/bin/env bash
# Builds the tensorflow-vgpu wheel: dist/tensorflow_vgpu-<version>-<python tag>-linux_x86_64.whl,
# holding the plugin (tensorflow-plugins/libvgpu_plugin.so), the vgpu package with its pybind11
# module and the vgpu-server executable, and the Keras hook (.pth). Its native code finds
# TensorFlow's and oneDNN's libraries in their own wheels through $ORIGIN-relative RUNPATHs:
# nothing of the build machine is referenced. Then lists the wheel's external dependencies
# (scripts/wheel_report.py). docs/building.md explains the choices.
#
#   scripts/build_wheel.sh                      the portable wheel (any x86-64 CPU TensorFlow runs on)
#   scripts/build_wheel.sh --cpu_target=native  for this machine's CPU only (cmake/CpuTarget.cmake)
#   scripts/build_wheel.sh --tests              also builds the C++ tests in the build folder
#                                               (scripts/setup.sh; they are not in the wheel)
#   scripts/build_wheel.sh --standalone_server  vgpu-server without any TensorFlow library
#                                               (VGPU_BUILD_STANDALONE_SERVER; twice the build)
#
# Every option is passed to CMake explicitly, so a build folder configured before with other
# values (a cached -D) follows what this command says.
#
# Sets up .venv first (scripts/setup.sh --env-only) unless VGPU_ENV_READY=1. Incremental: the
# build folder is build/<wheel tag>, as for scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VGPU_VENV:-.venv}

tests=OFF
standalone=OFF
cpu_target=${VGPU_CPU_TARGET:-portable}
for arg in "$@"; do
  case "$arg" in
    --tests) tests=ON ;;
    --standalone_server) standalone=ON ;;
    --cpu_target=*) cpu_target=${arg#--cpu_target=} ;;
    *) echo "build_wheel: unknown argument '$arg' (--tests, --standalone_server, --cpu_target=NAME)" >&2; exit 2 ;;
  esac
done

[ "${VGPU_ENV_READY:-0}" = 1 ] || ./scripts/setup.sh --env-only

mkdir -p dist
rm -f dist/tensorflow_vgpu-*.whl
started=$(date +%s)
"$VENV/bin/python" -m pip --disable-pip-version-check -q wheel --no-build-isolation --no-deps \
  -w dist -Ccmake.define.VGPU_BUILD_TESTS="$tests" -Ccmake.define.VGPU_CPU_TARGET="$cpu_target" \
  -Ccmake.define.VGPU_BUILD_STANDALONE_SERVER="$standalone" -Cbuild.verbose=false .
wheel=$(ls dist/tensorflow_vgpu-*.whl)
echo "build_wheel: $wheel ($(du -h "$wheel" | cut -f1), CPU target $cpu_target) in $(( $(date +%s) - started )) s"
"$VENV/bin/python" scripts/wheel_report.py "$wheel"
