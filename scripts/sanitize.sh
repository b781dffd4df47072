#!/usr/bin/env bash
# Builds the C++ tests that need no TensorFlow runtime (configuration, arena, streams, sessions,
# wire format, executor kernels, `vgpu server` with socket clients, and the multi-tenant stress
# test) under sanitizers, each in its own build folder, and runs them:
#   build/sanitize-asan   AddressSanitizer + UndefinedBehaviorSanitizer: all of vgpu_core_tests,
#                         and the stress test for VGPU_STRESS_SECONDS (default 30)
#   build/sanitize-tsan   ThreadSanitizer: the server, stream, session, notification and client
#                         tests of vgpu_core_tests, and the stress test
# Usage: scripts/sanitize.sh [asan|tsan|all]   (default all). Exit status: non-zero if any
# sanitizer report or test failure. Logs: build/sanitize-*/logs/.
#
# Environment: VGPU_STRESS_SECONDS (default 30), VGPU_STRESS_SEED
# VGPU_SANITIZE_JOBS (build jobs, default CMAKE_BUILD_PARALLEL_LEVEL or 1).
#
# Abseil. The project's static libraries compile against the TensorFlow wheel's headers and
# reach Abseil's compiled parts (Status, StrCat, the hash tables' slow paths, ...) through
# libtensorflow_framework.so.2, which is not instrumented. What that means, and the setup chosen:
#  - ASan/UBSan: sound without Abseil instrumented. ASan intercepts malloc/free process-wide, so
#    every heap block the library hands out or frees is still checked where OUR code touches it;
#    only accesses made inside the library itself go unchecked (not our code). UBSan checks our
#    code only, which is the point.
#  - TSan: the danger is false positives, not missed races in our code: the library's atomics
#    (absl::Status's reference count, absl::Mutex) are invisible to TSan, so it could see no
#    ordering between two threads that the library does order. We run with
#    ignore_noninstrumented_modules=1, which makes TSan ignore the interceptors (malloc, free,
#    memcpy, pthread calls) CALLED FROM uninstrumented modules, so a block freed inside the
#    library after its own atomic decrement is not reported as racing. Every access our code
#    makes is still checked. Debian's libabsl-dev is no alternative: it is 20220623 (the wheel
#    has lts_20250814, which the code is written against) and it is not TSan-instrumented either.
#    Our own code uses std::mutex/std::thread/std::atomic (all seen by TSan). The suppressions in
#    scripts/tsan.supp (each with its reason) cover what remains inside the library.
# GoogleTest comes from Debian's libgtest-dev (uninstrumented; it only runs the tests).
# Cost: each sanitizer build compiles every executor kernel (Eigen, instrumented) once, then
# ccache keeps it; on a busy 2-core machine a single convolution file took over 15 minutes under
# ASan, so give it VGPU_SANITIZE_JOBS on a machine that has the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MODE=${1:-all}
case "$MODE" in asan|tsan|all) ;; *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;; esac
export VGPU_STRESS_SECONDS=${VGPU_STRESS_SECONDS:-30}
JOBS=${VGPU_SANITIZE_JOBS:-${CMAKE_BUILD_PARALLEL_LEVEL:-1}}

# The environment setup.sh prepares (system packages, .venv with TensorFlow and the build tools),
# without building the wheel: the sanitizer builds only need the headers and the library.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import tensorflow, pybind11" >/dev/null 2>&1 \
   || [ ! -f /usr/include/gtest/gtest.h ]; then
  echo "sanitize: preparing the environment (scripts/setup.sh)"
  ./scripts/setup.sh
fi
PYTHON=$ROOT/.venv/bin/python
PYBIND11_DIR=$("$PYTHON" -m pybind11 --cmakedir)
CMAKE=cmake
[ -x .venv/bin/cmake ] && CMAKE=$ROOT/.venv/bin/cmake

# The core test binaries: those that link no TensorFlow runtime (libtensorflow_framework.so.2
# only supplies Abseil). vgpu_stream_executor_tests drives the StreamExecutor C API and is left
# to the normal build.
TARGETS=(vgpu_core_tests vgpu_server_stress_tests)
# TSan: the tests of the threaded parts (server, streams, sessions, the fair compute pool, hub,
# client runtime, executor registry and transport factory).
TSAN_FILTER='Server*:AuthThrottle*:StreamQueue*:ClientSession*:SessionLayer*:CpuExecutor*:FairComputePool*:ExecutorRegistry*:TransportFactory*:NotificationHub*:DeviceClient*:EarlyEvent*:DeviceArena*:WireFormat*-*DeathTest*'

failures=0

build() {  # build <folder> <sanitizers>
  local dir=$1 sanitizers=$2
  echo "sanitize: building $dir (VGPU_SANITIZE=$sanitizers)"
  # The portable CPU target, never -march=native: with AVX-512, GCC spills to 64-byte-aligned stack slots
  # with aligned stores, while ASan's fake stack (detect_stack_use_after_return) aligns frames
  # to 32 bytes only: the store faults inside the test code, not in the code under test.
  # The tests use the TensorFlow flavour of the layers: no standalone server (its second copy
  # of the CPU kernels).
  "$CMAKE" -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVGPU_BUILD_TESTS=ON "-DVGPU_SANITIZE=$sanitizers" -DVGPU_CPU_TARGET=portable \
    -DVGPU_BUILD_STANDALONE_SERVER=OFF \
    -DPython_EXECUTABLE="$PYTHON" -Dpybind11_DIR="$PYBIND11_DIR" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; return 1; }
  "$CMAKE" --build "$dir" -j "$JOBS" --target "${TARGETS[@]}"
}

run() {  # run <log name> <command...>: runs, keeps the log, counts a failure
  local log=$1; shift
  echo "sanitize: $log: $*"
  if "$@" >"$LOGS/$log.log" 2>&1; then
    echo "sanitize: $log: passed ($(grep -c '^\[       OK \]' "$LOGS/$log.log" || true) tests)"
  else
    echo "sanitize: $log: FAILED (log: $LOGS/$log.log)"
    grep -E "^(SUMMARY|==[0-9]+==ERROR|WARNING: ThreadSanitizer)|runtime error|\[  FAILED  \]" \
      "$LOGS/$log.log" | sort | uniq -c | head -40 || true
    failures=$((failures + 1))
  fi
}

if [ "$MODE" = asan ] || [ "$MODE" = all ]; then
  DIR=build/sanitize-asan
  mkdir -p "$DIR"
  build "$DIR" "address;undefined"
  LOGS=$ROOT/$DIR/logs; mkdir -p "$LOGS"
  # detect_leaks=0: LeakSanitizer does not work under ptrace-restricted containers and the
  # TensorFlow library keeps process-lifetime singletons; the tests check reclaim themselves.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # The death test checks that touching a device address on the host faults (SIGSEGV); ASan's
  # own SEGV handler would turn that into an exit code, so it runs with handle_segv=0.
  run asan-core "$DIR/tests/cpp/vgpu_core_tests" "--gtest_filter=-*DeathTest*"
  ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0" run asan-death "$DIR/tests/cpp/vgpu_core_tests" \
    "--gtest_filter=*DeathTest*"
  run asan-stress "$DIR/tests/cpp/vgpu_server_stress_tests"
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [ "$MODE" = tsan ] || [ "$MODE" = all ]; then
  DIR=build/sanitize-tsan
  mkdir -p "$DIR"
  build "$DIR" "thread"
  LOGS=$ROOT/$DIR/logs; mkdir -p "$LOGS"
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1:suppressions=$ROOT/scripts/tsan.supp}
  # TSan reports races without failing the process unless exitcode is set (it is 66 by default).
  run tsan-core "$DIR/tests/cpp/vgpu_core_tests" "--gtest_filter=$TSAN_FILTER"
  run tsan-stress "$DIR/tests/cpp/vgpu_server_stress_tests"
  unset TSAN_OPTIONS
fi

if [ "$failures" -ne 0 ]; then
  echo "sanitize: $failures run(s) failed"
  exit 1
fi
echo "sanitize: all runs clean"
