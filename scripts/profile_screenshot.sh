#!/usr/bin/env bash
# Makes docs/img/trace_viewer.png: profiles two training steps of the `vgpu bench` cnn model on
# the virtual GPU (executor in process), serves the profile with TensorBoard's Profile tab
# (xprof) and photographs its trace viewer with headless Chromium. Needs the project's venv
# (./scripts/setup.sh) and Debian's chromium; installs tensorboard and websocket-client into the
# venv. Usage: scripts/profile_screenshot.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-docs/img/trace_viewer.png}"
PY=.venv/bin/python
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 1; }
"$PY" -m pip install -q tensorboard "xprof==2.24.*" websocket-client
WORK="$(mktemp -d)"
trap 'kill "${TB_PID:-0}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

TF_CPP_MIN_LOG_LEVEL=2 "$PY" - "$WORK/logs" <<'PY'
import sys
import keras, tensorflow as tf
from vgpu.bench import models
model = models.build("cnn")
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x, y = models.make_data(64 * 3)
model.fit(x, y, batch_size=64, epochs=1, verbose=0)      # warm-up: tracing, descriptors
tf.profiler.experimental.start(sys.argv[1])
model.fit(x[:128], y[:128], batch_size=64, epochs=1, verbose=0)   # two steps
[w.numpy() for w in model.weights]
tf.profiler.experimental.stop()
PY
RUN="$(ls "$WORK/logs/plugins/profile")"
HOST="$(basename "$(ls "$WORK"/logs/plugins/profile/*/*.xplane.pb)" .xplane.pb)"
.venv/bin/tensorboard --logdir "$WORK/logs" --port 6123 >"$WORK/tb.log" 2>&1 &
TB_PID=$!
for _ in $(seq 60); do curl -sf localhost:6123/data/plugin/profile/runs >/dev/null && break; sleep 1; done
DATA="$("$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' \
  "/data/plugin/profile/data?run=$RUN&tag=trace_viewer&host=$HOST")"
"$PY" scripts/cdp_screenshot.py \
  "http://localhost:6123/data/plugin/profile/trace_viewer_index.html?is_streaming=false&is_oss=true&trace_data_url=$DATA" \
  "$OUT" 25
echo "wrote $OUT"
