"""``python -m vgpu.bench`` (same as ``vgpu bench``): trains the benchmark models under several
configurations, side by side in one run, measures the transports, and writes results.json,
table.md and PNG plots into --out (see vgpu/bench/runner.py)."""
from __future__ import annotations

from absl import app

from vgpu.bench import runner


def main(argv):
    del argv
    return runner.main_from_flags()


if __name__ == "__main__":
    app.run(main)
