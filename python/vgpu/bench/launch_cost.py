"""The cost of one tiny kernel launch, run in a child process: a tf.function of `--ops` chained
element-wise ops (sin) on a one-element tensor, timed per call and divided by the ops. On the
virtual GPU (in process or through VGPU_BACKEND's server) every op is one launch; with
``--device cpu`` TensorFlow's own CPU kernels run the same graph, the reference for what
TensorFlow itself costs per op.

    python -m vgpu.bench.launch_cost --device gpu --ops 200 --repeats 20
"""
from __future__ import annotations

import json
import statistics
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_enum("device", "gpu", ["gpu", "cpu"], "The virtual GPU, or TensorFlow's CPU.")
flags.DEFINE_integer("ops", 200, "Chained ops per call (one launch each on the virtual GPU).")
flags.DEFINE_integer("repeats", 20, "Timed calls (after two untimed ones).")


def main(argv):
    del argv
    import tensorflow as tf

    if FLAGS.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    ops = FLAGS.ops

    @tf.function
    def chain(x):
        for _ in range(ops):  # unrolled: `ops` nodes that no graph rewrite can merge
            x = tf.math.sin(x)
        return x

    with tf.device("GPU:0" if FLAGS.device == "gpu" else "CPU:0"):
        x = tf.constant([0.5], tf.float32)
        for _ in range(2):
            chain(x).numpy()  # tracing, warm-up (and the descriptor method's warm-up)
        launches_before = _launches() if FLAGS.device == "gpu" else 0
        times = []
        for _ in range(FLAGS.repeats):
            start = time.perf_counter()
            chain(x).numpy()  # the result's copy back waits for the whole chain
            times.append(time.perf_counter() - start)
    launches = (_launches() - launches_before) / FLAGS.repeats if FLAGS.device == "gpu" else None
    median = statistics.median(times)
    print("VGPU_BENCH_RESULT " + json.dumps({
        "device": FLAGS.device, "ops": ops, "call_s": times, "median_call_s": median,
        "us_per_op": 1e6 * median / ops, "launches_per_call": launches}))


def _launches() -> int:
    import vgpu

    return vgpu.stats()["launches"]


if __name__ == "__main__":
    app.run(main)
