#!/usr/bin/env bash
# The libFuzzer fuzz targets, coverage-guided, built with clang and
# -fsanitize=fuzzer,address,undefined in build/fuzz:
#   kernel       (default) kernel payloads (tests/fuzz/kernel_launch_fuzz.h), seeded with one
#                valid launch per kernel (tests/fuzz/corpus)
#   trace        the command-trace reader (tests/fuzz/trace_reader_fuzzer.cc), seeded with small
#                real traces (tests/fuzz/trace_corpus)
#   trace_stats  the trace reader and the `vgpu trace stats` replay over a trace that reads
# Findings (crashes, overruns, escaping exceptions, allocations over the malloc limit) land in
# build/fuzz/findings-TARGET; the mutated corpus grows in build/fuzz/corpus-TARGET (neither is
# committed).
#
#   scripts/fuzz.sh [--target=NAME] [runs]   run a target for `runs` executions (default
#                                            1000000)
#   scripts/fuzz.sh --seeds   regenerate tests/fuzz/corpus from the launches the C++ kernel
#                             tests and the Python op tests run (VGPU_RECORD_FUZZ_CORPUS)
# Installs clang through apt (sudo when not root) when it is missing; needs scripts/setup.sh's
# .venv (TensorFlow's headers and libtensorflow_framework.so.2).
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-1}
VENV=${VGPU_VENV:-.venv}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${1:-}" = "--seeds" ]; then
  # The kernel dispatch writes every launch it runs to VGPU_RECORD_FUZZ_CORPUS: run the C++
  # kernel tests and the Python op tests (in-process backend) that way, then keep the two
  # smallest distinct launches of every kernel.
  raw=$(mktemp -d)
  tests=$(ls build/*/tests/cpp/vgpu_core_tests | head -n 1)
  VGPU_RECORD_FUZZ_CORPUS=$raw "$tests" --gtest_filter='-HostileLaunch*:Server*' >/dev/null || true
  VGPU_RECORD_FUZZ_CORPUS=$raw "$VENV/bin/python" -m pytest -q -x tests/python/ops >/dev/null || true
  rm -rf tests/fuzz/corpus && mkdir -p tests/fuzz/corpus
  for kernel in $(ls "$raw" | sed 's/-[0-9a-f]*$//' | sort -u); do
    ls -S -r "$raw/$kernel"-* | head -n 2 | xargs -I{} cp {} tests/fuzz/corpus/
  done
  rm -rf "$raw"
  echo "fuzz: $(ls tests/fuzz/corpus | wc -l) seeds for $(ls tests/fuzz/corpus | sed 's/-[0-9a-f]*$//' | sort -u | wc -l) kernels in tests/fuzz/corpus"
  exit 0
fi
target=kernel
if [[ "${1:-}" == --target=* ]]; then
  target=${1#--target=}
  shift
fi
case "$target" in
  kernel) binary=vgpu_kernel_launch_fuzzer seeds=tests/fuzz/corpus max_len=4096 malloc_mb=4096
          rss_mb=4096 ;;
  trace) binary=vgpu_trace_reader_fuzzer seeds=tests/fuzz/trace_corpus max_len=16384
         malloc_mb=64 rss_mb=2048 ;;
  trace_stats) binary=vgpu_trace_stats_fuzzer seeds=tests/fuzz/trace_corpus max_len=16384
               malloc_mb=512 rss_mb=2048 ;;
  *) echo "fuzz: unknown --target=$target (kernel, trace, trace_stats)" >&2; exit 2 ;;
esac
runs=${1:-1000000}

if ! command -v clang++ >/dev/null; then
  echo "fuzz: installing clang"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq clang >/dev/null
fi
# The CPU executor's oneDNN code includes <omp.h> (GNU OpenMP build of oneDNN): clang needs
# LLVM's copy of the header (the runtime stays libgomp's, linked through libdnnl).
if ! echo '#include <omp.h>' | clang++ -x c++ -fsyntax-only - 2>/dev/null; then
  echo "fuzz: installing libomp-dev (omp.h for clang)"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq libomp-dev >/dev/null
fi
[ -x "$VENV/bin/python" ] || ./scripts/setup.sh

sanitizers="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
# vptr checks need RTTI of TensorFlow's types, which the wheel does not export.
sanitizers="$sanitizers -fno-sanitize=vptr"
cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$sanitizers -fno-omit-frame-pointer -O1 -gline-tables-only" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DPython_EXECUTABLE="$PWD/$VENV/bin/python" -Dpybind11_DIR="$("$VENV/bin/python" -m pybind11 --cmakedir)" -DVGPU_BUILD_FUZZERS=ON -DVGPU_CPU_TARGET=portable \
  -DVGPU_BUILD_STANDALONE_SERVER=OFF >/dev/null
cmake --build build/fuzz --target "$binary"

# The kernel target keeps its historical folder names.
suffix=$([ "$target" = kernel ] || echo "-$target")
mkdir -p "build/fuzz/corpus$suffix" "build/fuzz/findings$suffix"
cd build/fuzz
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "./tests/fuzz/$binary" -runs="$runs" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb" \
  -artifact_prefix="findings$suffix/" -print_final_stats=1 "corpus$suffix" "../../$seeds"
