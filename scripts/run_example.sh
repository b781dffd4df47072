#!/usr/bin/env bash
# The main job: trains the Keras example on the virtual GPU (in-process backing executor).
# Does all set-up itself (scripts/setup.sh). Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
VENV=${VGPU_VENV:-.venv}
exec "$VENV/bin/python" examples/keras_cnn.py "$@"
