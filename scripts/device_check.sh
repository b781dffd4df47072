#!/usr/bin/env bash
# The CUDA executor's check on the GPU machine (docs/cuda.md): no TensorFlow, no network; CUDA
# 13.0, cuDNN and cuBLAS from NVIDIA's Python packages in the system Python, CMake, ninja,
# PyTorch. Needs .device-kit/ (scripts/prepare_device_kit.sh, run on the CPU machine). Steps:
#   1. configure build-device/ standalone-only with VGPU_CUDA=ON from the kit; build vgpu-server
#      and vgpu_cuda_tests with every core;
#   2. run vgpu_cuda_tests (the executor basics; the differential test over the op-test trace;
#      the executor conformance suite, tests/conformance/, on cuda and on cpu): its failures and
#      skips (with the suite's list of tests cuda declares unsupported) are printed, the whole
#      log kept in $OUT/vgpu_cuda_tests.log;
#   3. per trace: `vgpu-server trace replay --executor cuda --rtol 1e-3 --atol 1e-4` (against the
#      recorded CPU results) and `trace stats` on cuda and on cpu (per-step times);
#   4. PyTorch's training step of the same CNN as cnn.vgtrace's, as the anchor;
#   5. one table, and the conformance suite's counts per executor. Forward vs reuse mode: the
#      trace tool replays what was recorded (the mode is the client's, fixed at recording), so
#      it is not compared here.
# Writes its log to $OUT/device_check.log when OUT is set. Must finish in under 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
KIT=$(pwd)/.device-kit
BUILD=build-device
LOG=${OUT:+$OUT/device_check.log}
LOG=${LOG:-/tmp/device_check.log}
exec > >(tee "$LOG") 2>&1
START=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - START ))s)"; }

NVIDIA=$(python3 -c 'import nvidia, os; print(os.path.abspath(list(nvidia.__path__)[0]))')
echo "NVIDIA packages: $NVIDIA"; nvidia-smi -L 2>/dev/null || true
export LD_LIBRARY_PATH="$NVIDIA/cu13/lib:$NVIDIA/cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The toolkit: NVIDIA's pip packages when they hold nvcc; otherwise the system's (/usr/local/cuda),
# with cuDNN (and cuBLAS, if the system lacks it) still taken from the packages.
CUDA_ARGS=(-DVGPU_CUDA_PACKAGES="$NVIDIA")
if [ ! -x "$NVIDIA/cu13/bin/nvcc" ]; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "toolkit: $NVCC (the packages hold no nvcc)"
  CUDA_ARGS=(-DVGPU_CUDA_PACKAGES= -DCMAKE_CUDA_COMPILER="$NVCC"
             -DCMAKE_LIBRARY_PATH="$NVIDIA/cudnn/lib;$NVIDIA/cu13/lib"
             -DCMAKE_INCLUDE_PATH="$NVIDIA/cudnn/include")
fi

step "configure"
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVGPU_STANDALONE_ONLY=ON \
  -DVGPU_CUDA=ON "${CUDA_ARGS[@]}" -DVGPU_ONEDNN=OFF -DVGPU_BUILD_TESTS=ON \
  -DVGPU_EIGEN_INCLUDE_DIR="$KIT/eigen" -DVGPU_ABSEIL_ROOT="$KIT/abseil" \
  -DCMAKE_PREFIX_PATH="$KIT/gtest" -DGTEST_ROOT="$KIT/gtest" > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
step "build"
cmake --build "$BUILD" -j "$(nproc)" --target vgpu_server_main vgpu_cuda_tests 2>&1 | tail -20
SERVER=$BUILD/plugin/vgpu-server
[ -x "$SERVER" ] || { echo "device_check: build failed"; exit 1; }
"$SERVER" --list_executors

step "vgpu_cuda_tests"
RESULTS=$BUILD/device-results
mkdir -p "$RESULTS"
TESTS_LOG=$RESULTS/vgpu_cuda_tests.log
OPS_TRACE=$KIT/traces/ops.vgtrace
VGPU_CUDA_DIFF_TRACE=$([ -s "$OPS_TRACE" ] && echo "$OPS_TRACE") \
  timeout 180 "$BUILD/tests/cuda/vgpu_cuda_tests" > "$TESTS_LOG" 2>&1
TESTS_RC=$?
[ -n "${OUT:-}" ] && cp "$TESTS_LOG" "$OUT/"
# Everything but the lines of passing tests: the suite's list, failures with their messages,
# skips with their reasons, the summary.
grep -vE '^\[ +(RUN|OK) +\]|^\[----------\]|^$' "$TESTS_LOG" | tail -150
for trace in "$KIT"/traces/*.vgtrace; do
  name=$(basename "$trace" .vgtrace)
  step "trace $name"
  timeout 120 "$SERVER" trace replay "$trace" --executor cuda --rtol 1e-3 --atol 1e-4 \
    > "$RESULTS/$name.replay" 2>&1; echo "replay rc=$?" >> "$RESULTS/$name.replay"
  tail -4 "$RESULTS/$name.replay"
  [ "$name" = ops ] && continue  # hundreds of tiny tests: no steps to time
  for executor in cuda cpu; do
    timeout 90 "$SERVER" trace stats "$trace" --executor "$executor" > "$RESULTS/$name.$executor.stats" 2>&1
  done
done

step "PyTorch anchor (the CNN of cnn.vgtrace: 16x16x3, conv8-relu-pool-conv16-relu-bn-gap-dense10, batch 8, adam)"
timeout 120 python3 - > "$RESULTS/torch.txt" 2>&1 <<'PY'
import time, torch, torch.nn as nn
dev = "cuda"
m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3),
                  nn.ReLU(), nn.BatchNorm2d(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                  nn.Linear(16, 10)).to(dev)
opt = torch.optim.Adam(m.parameters()); loss = nn.CrossEntropyLoss()
x = torch.rand(8, 3, 16, 16, device=dev); y = torch.randint(0, 10, (8,), device=dev)
def step():
    opt.zero_grad(); loss(m(x), y).backward(); opt.step()
for _ in range(20): step()
torch.cuda.synchronize(); t = time.perf_counter(); n = 200
for _ in range(n): step()
torch.cuda.synchronize(); print(f"torch_ms_per_step {(time.perf_counter() - t) / n * 1e3:.3f}")
PY
cat "$RESULTS/torch.txt"

step "table"
python3 - "$RESULTS" <<'PY'
import os, re, statistics, sys
results = sys.argv[1]
def steps(path):
    # `trace stats` step rows: step, device, iteration, commands, calls, recorded ms, replay ms
    try: text = open(path).read()
    except OSError: return None
    ms = [float(m.group(1)) for m in re.finditer(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+([\d.]+)$", text, re.M)]
    if not ms: return None
    return statistics.median(ms[1:] if len(ms) > 1 else ms)  # after the first (warm-up) step
torch = open(os.path.join(results, "torch.txt")).read()
torch_ms = re.search(r"torch_ms_per_step ([\d.]+)", torch)
rows = []
for f in sorted(os.listdir(results)):
    if not f.endswith(".replay"): continue
    name = f[:-len(".replay")]
    text = open(os.path.join(results, f)).read()
    ok = "replay rc=0" in text
    compare = "pass" if ok else "FAIL: " + (re.findall(r"(MISMATCH[^\n]*|error[^\n]*)", text, re.I) or [text.strip().splitlines()[-2] if len(text.strip().splitlines()) > 1 else "?"])[0][:60]
    c = steps(os.path.join(results, name + ".cpu.stats")); g = steps(os.path.join(results, name + ".cuda.stats"))
    rows.append((name, compare, "-" if c is None else f"{c:.2f}", "-" if g is None else f"{g:.2f}",
                 "n/a (not in trace stats)"))
print(f"{'trace':<12} {'compare (rtol 1e-3)':<64} {'cpu ms/step':>11} {'cuda ms/step':>12}  primitives created/step")
for r in rows: print(f"{r[0]:<12} {r[1]:<64} {r[2]:>11} {r[3]:>12}  {r[4]}")
print(f"{'torch cnn':<12} {'(anchor, PyTorch on the same GPU)':<64} {'-':>11} {torch_ms.group(1) if torch_ms else '?':>12}")
PY
# The conformance suite per executor: tests passed, failed and skipped (one line per test ends
# with its time).
count() { grep -cE "^\[ +$1 +\] Conformance/[^ ,]*/$2[ ,].*\([0-9]+ ms\)$" "$TESTS_LOG"; }
for executor in cuda cpu; do
  echo "conformance on $executor: $(count OK "$executor") passed," \
       "$(count FAILED "$executor") failed, $(count SKIPPED "$executor") skipped"
done
echo "vgpu_cuda_tests rc=$TESTS_RC; total $(( $(date +%s) - START ))s; log: $LOG"
