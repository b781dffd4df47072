#!/usr/bin/env bash
# Fills .device-kit/ (ignored by git, carried to the GPU machine with the working tree) with what
# that machine lacks for scripts/device_check.sh: it has CUDA, CMake, ninja and Python 3.12 but
# neither TensorFlow nor Debian's libabsl-dev/libgtest-dev, and no network.
#   .device-kit/abseil/{include,lib}  the system's Abseil headers and static archives (/usr)
#   .device-kit/gtest/{include,lib}   GoogleTest headers and static libraries (/usr)
#   .device-kit/eigen/                the part of TensorFlow's include folder the CPU executor's
#                                     kernels include (Eigen/, unsupported/, the TSL/XLA
#                                     convolution and contraction headers, TF's eigen_*.h)
#   .device-kit/traces/*.vgtrace      small command traces with their recorded CPU results
# Traces: recorded with scripts/record_device_traces.py by VGPU_PYTHON (a Python with TensorFlow
# and the vgpu plugin; default .venv/bin/python), unless already there (--rerecord to redo), and
# the op-test trace (ops.vgtrace) from a pytest run of tests/python/ops in VGPU_OPS_CHECKOUT.
# Prints the kit's size; the carried working tree is limited to 64 MiB, so the kit must stay well
# under 60 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=.device-kit
PY=$(realpath -s "${VGPU_PYTHON:-.venv/bin/python}")
RERECORD=0
[ "${1:-}" = "--rerecord" ] && RERECORD=1
LIBDIR=/usr/lib/x86_64-linux-gnu

mkdir -p "$KIT/abseil/include" "$KIT/abseil/lib" "$KIT/gtest/include" "$KIT/gtest/lib" "$KIT/eigen" \
         "$KIT/traces"
rm -rf "$KIT/abseil/include/absl" "$KIT/gtest/include/gtest"
cp -r /usr/include/absl "$KIT/abseil/include/"
cp "$LIBDIR"/libabsl_*.a "$KIT/abseil/lib/"
cp -r /usr/include/gtest "$KIT/gtest/include/"
cp "$LIBDIR"/libgtest.a "$LIBDIR"/libgtest_main.a "$KIT/gtest/lib/"

TF_INCLUDE=$("$PY" -c 'import os, importlib.util as u; print(os.path.join(os.path.dirname(u.find_spec("tensorflow").origin), "include"))')
rm -rf "$KIT/eigen"/*
cp -r "$TF_INCLUDE/Eigen" "$TF_INCLUDE/unsupported" "$KIT/eigen/"
for part in xla/tsl/framework/convolution xla/tsl/framework/contraction \
            xla/tsl/framework/fixedpoint; do
  if [ -d "$TF_INCLUDE/$part" ]; then
    mkdir -p "$KIT/eigen/$(dirname "$part")"
    cp -r "$TF_INCLUDE/$part" "$KIT/eigen/$part"
  fi
done
mkdir -p "$KIT/eigen/xla/tsl/platform" "$KIT/eigen/tensorflow/core/kernels"
cp "$TF_INCLUDE"/xla/tsl/platform/dynamic_annotations.h "$KIT/eigen/xla/tsl/platform/" 2>/dev/null || true
cp "$TF_INCLUDE"/tensorflow/core/kernels/eigen_*.h "$KIT/eigen/tensorflow/core/kernels/"

if [ "$RERECORD" = 1 ] || [ ! -s "$KIT/traces/cnn.vgtrace" ]; then
  "$PY" scripts/record_device_traces.py "$KIT/traces"
fi
if [ -n "${VGPU_OPS_CHECKOUT:-}" ] && { [ "$RERECORD" = 1 ] || [ ! -s "$KIT/traces/ops.vgtrace" ]; }; then
  # float32/int32 op tests of the families Keras models use most, stopped (SIGINT: pytest
  # exits normally, the trace ends at a record boundary) once the trace passes
  # VGPU_OPS_TRACE_MIB (default 6): the whole float32 op suite records 36 MiB, too much to carry.
  OPS_FILES=(activation elementwise reduction normalization training pooling convolution)
  OPS_TRACE=$(pwd)/$KIT/traces/ops.vgtrace
  CAP=$(( ${VGPU_OPS_TRACE_MIB:-6} * 1048576 ))
  rm -f "$OPS_TRACE"
  (cd "$VGPU_OPS_CHECKOUT" && exec env VGPU_TRACE="$OPS_TRACE" "$PY" -m pytest \
     $(printf 'tests/python/ops/test_%s_ops.py ' "${OPS_FILES[@]}") -q -p no:cacheprovider \
     -k 'not 3d and not bfloat16 and not float16 and not half and not float64 and not int64 and not complex') &
  PYTEST=$!
  while kill -0 "$PYTEST" 2>/dev/null; do
    if [ "$(stat -c %s "$OPS_TRACE" 2>/dev/null || echo 0)" -gt "$CAP" ]; then
      kill -INT "$PYTEST"; break
    fi
    sleep 2
  done
  wait "$PYTEST" || true
fi
ls -la "$KIT/traces"
echo "prepare_device_kit: $(du -sh "$KIT" | cut -f1) in $KIT (must stay well under 60 MiB)"
