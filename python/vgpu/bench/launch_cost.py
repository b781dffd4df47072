"""The cost of one tiny kernel launch, run in a child process: two tf.functions, chains of
`--short_ops` and `--ops` element-wise ops (sin) on a one-element tensor, called in turn and
timed per call. The cost of an op is the slope between the two chains' median calls,
(long - short) / (ops - short_ops); what a call costs besides its ops (TensorFlow's function
call, the result's copy back) is the rest of the short chain's call. On the virtual GPU (in
process or through VGPU_BACKEND's server) every op is one launch; with ``--device cpu``
TensorFlow's own CPU kernels run the same graph, the reference for what TensorFlow itself costs
per op.

Grappler's arithmetic optimizer is off in both: on the CPU it composes a chain of element-wise
ops into one `_UnaryOpsComposition` op, after which a call of 3000 sins takes as long as a call
of 20, and no op is left to time (the GPU device has no such composition).

    python -m vgpu.bench.launch_cost --device gpu --ops 420 --short_ops 20 --repeats 100
"""
from __future__ import annotations

import json
import statistics
import time

from absl import app, flags

FLAGS = flags.FLAGS


def _chain(tf, ops: int):
    @tf.function
    def chain(x):
        for _ in range(ops):  # unrolled: `ops` nodes, one kernel each
            x = tf.math.sin(x)
        return x

    return chain


def per_op_cost(short_s: float, long_s: float, short_ops: int, ops: int) -> tuple[float, float]:
    """(µs per op, µs per call besides its ops) from the median calls of a chain of `short_ops`
    and one of `ops` ops: the slope and the intercept of the line through the two."""
    if ops <= short_ops:
        raise ValueError(f"the long chain ({ops} ops) must be longer than the short one "
                         f"({short_ops})")
    per_op = (long_s - short_s) / (ops - short_ops)
    return 1e6 * per_op, 1e6 * (short_s - short_ops * per_op)


def main(argv):
    del argv
    import tensorflow as tf

    if FLAGS.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
    chains = {FLAGS.short_ops: _chain(tf, FLAGS.short_ops), FLAGS.ops: _chain(tf, FLAGS.ops)}

    with tf.device("GPU:0" if FLAGS.device == "gpu" else "CPU:0"):
        x = tf.constant([0.5], tf.float32)
        for _ in range(3):  # tracing, warm-up, and the descriptor method's warm-up, which
            for chain in chains.values():  # needs the calls' sequence to repeat
                chain(x).numpy()
        times = {ops: [] for ops in chains}
        long_chain_launches = 0
        for _ in range(FLAGS.repeats):
            for ops, chain in chains.items():  # in turn, so that both see the same machine
                before = _launches() if FLAGS.device == "gpu" else 0
                start = time.perf_counter()
                chain(x).numpy()  # the result's copy back waits for the whole chain
                times[ops].append(time.perf_counter() - start)
                if FLAGS.device == "gpu" and ops == FLAGS.ops:
                    long_chain_launches += _launches() - before
    medians = {ops: statistics.median(t) for ops, t in times.items()}
    us_per_op, call_us = per_op_cost(medians[FLAGS.short_ops], medians[FLAGS.ops],
                                     FLAGS.short_ops, FLAGS.ops)
    launches_per_call = (long_chain_launches / FLAGS.repeats
                         if FLAGS.device == "gpu" else None)
    print("VGPU_BENCH_RESULT " + json.dumps({
        "device": FLAGS.device, "ops": FLAGS.ops, "short_ops": FLAGS.short_ops,
        "call_s": times[FLAGS.ops], "short_call_s": times[FLAGS.short_ops],
        "median_call_s": medians[FLAGS.ops], "median_short_call_s": medians[FLAGS.short_ops],
        "us_per_op": us_per_op, "call_us": call_us, "launches_per_call": launches_per_call}))


def _define_flags() -> None:
    """The command line's flags (defined only when this module runs as a program, so that
    importing it, as the tests do, leaves other programs' flags alone)."""
    flags.DEFINE_enum("device", "gpu", ["gpu", "cpu"], "The virtual GPU, or TensorFlow's CPU.")
    flags.DEFINE_integer("ops", 420, "Chained ops per call of the long chain (one launch each on "
                         "the virtual GPU).")
    flags.DEFINE_integer("short_ops", 20, "Chained ops per call of the short chain.")
    flags.DEFINE_integer("repeats", 100, "Timed calls of each chain (after three untimed ones).")


def _launches() -> int:
    import vgpu

    return vgpu.stats()["launches"]


if __name__ == "__main__":
    _define_flags()
    app.run(main)
