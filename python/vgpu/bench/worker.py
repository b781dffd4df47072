"""One benchmark configuration, run in a child process: trains a model and prints one JSON line
with the step times and the vgpu counters per step.

    python -m vgpu.bench.worker --model cnn --device gpu --steps 30 --warmup 5 --batch_size 64

``--policy mixed_float16`` / ``mixed_bfloat16`` trains under Keras' mixed precision (16-bit
layers, float32 variables and logits). ``--device cpu`` hides the virtual GPU, so TensorFlow's own CPU kernels do the work; the
plugin's configuration (VGPU_BACKEND, VGPU_DESCRIPTOR_MODE, ...) comes from the environment.
"""
from __future__ import annotations

import json
import resource
import time

from absl import app, flags

from vgpu.bench import models

FLAGS = flags.FLAGS
flags.DEFINE_enum("model", "cnn", list(models.ALL_MODELS),
                  "Model to train: a bench model or a zoo model (vgpu/bench/zoo.py).")
flags.DEFINE_enum("device", "gpu", ["gpu", "cpu"], "Virtual GPU, or TensorFlow's CPU kernels.")
flags.DEFINE_integer("steps", 30, "Measured training steps (after the warm-up).")
flags.DEFINE_integer("warmup", 5, "Warm-up steps, not measured.")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("seed", 1, "Seed for data and weights.")
flags.DEFINE_enum("policy", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Keras' dtype policy for the model's layers (mixed: 16-bit computation, "
                  "float32 variables; the logits are cast to float32 for the loss).")
flags.DEFINE_bool("dataset", False, "Train from a tf.data dataset batched without "
                  "drop_remainder instead of from arrays: the traced step's batch size is then "
                  "unknown, as most users' fit on a dataset (or on arrays whose length is not a "
                  "multiple of the batch size) traces it, and shapes are computed each step.")
flags.DEFINE_string("profile_dir", "", "If set, take a TensorFlow profile of the measured "
                    "steps into this folder, each step marked by a 'vgpu_bench_step' trace "
                    "event (the per-op account of `vgpu bench --profile`, op_account.py).")


def _counters():
    import vgpu

    s = vgpu.stats()
    keys = ("descriptor_calls_forwarded", "descriptor_calls_local", "launches", "round_trips",
            "commands_sent", "bytes_to_device", "bytes_from_device", "bytes_sent",
            "bytes_received", "executor_primitives_created", "executor_primitives_reused",
            "command_bytes_sent", "templates_created", "launches_by_template")
    # The executor's primitive counters are None for devices on a server (they stay there).
    return {k: s[k] or 0 for k in keys}


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    if FLAGS.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    keras.utils.set_random_seed(FLAGS.seed)
    total_steps = FLAGS.warmup + FLAGS.steps
    images, labels = models.make_model_data(FLAGS.model, total_steps * FLAGS.batch_size,
                                            FLAGS.seed)
    keras.mixed_precision.set_global_policy(FLAGS.policy)
    model = models.build(FLAGS.model)
    if FLAGS.policy != "float32":  # float32 logits, as Keras' mixed precision guide has them
        model = keras.Sequential([model, keras.layers.Activation("linear", dtype="float32")])
    # On TensorFlow's CPU path, Keras' jit_compile="auto" would still pick XLA (the hidden virtual
    # GPU counts as a physical device); a CPU-only machine would not, so neither does the
    # baseline.
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False if FLAGS.device == "cpu" else "auto")

    step_times: list[float] = []
    per_step_counters: list[dict] = []  # one per warm-up step
    measured_counters: dict = {}  # summed over the measured steps
    use_vgpu = FLAGS.device == "gpu"

    profiled_span: dict[str, float] = {}
    # Context switches of this process's threads over the measured steps (getrusage counts every
    # thread, those that ended too): how often TensorFlow's threads and the virtual GPU's
    # workers blocked or were preempted, a count that depends far less on the machine's speed
    # than the step times do.
    switches: dict[str, int] = {}

    def context_switches():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"voluntary": usage.ru_nvcsw, "involuntary": usage.ru_nivcsw}

    class Timer(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if FLAGS.profile_dir and batch == FLAGS.warmup:
                tf.profiler.experimental.start(FLAGS.profile_dir)
            self.trace = None
            if FLAGS.profile_dir and batch >= FLAGS.warmup:
                self.trace = tf.profiler.experimental.Trace("vgpu_bench_step", step_num=batch)
                self.trace.__enter__()
            # Counters are read outside the timed window, and only where they are needed: every
            # warm-up step (the warm-up curve), then once before the first measured step and once
            # after the last. vgpu.stats() costs ~60 us and its JSON feeds Python's garbage
            # collector, which TensorFlow-CPU's steps would not pay.
            if use_vgpu and batch <= FLAGS.warmup:
                self.before = _counters()
            if batch == FLAGS.warmup:
                switches.update(context_switches())
            self.start = time.perf_counter()
            if self.trace is not None and "begin_s" not in profiled_span:
                profiled_span["begin_s"] = self.start

        def on_train_batch_end(self, batch, logs=None):
            end = time.perf_counter()
            step_times.append(end - self.start)
            if batch == total_steps - 1 and switches:
                after = context_switches()
                switches.update({k: after[k] - switches[k] for k in after})
            if use_vgpu and batch < FLAGS.warmup:
                after = _counters()
                per_step_counters.append({k: after[k] - self.before[k] for k in after})
            elif use_vgpu and batch == total_steps - 1:
                after = _counters()
                measured_counters.update({k: after[k] - self.before[k] for k in after})
            if self.trace is not None:
                self.trace.__exit__(None, None, None)
                profiled_span["end_s"] = end

        def on_train_end(self, logs=None):
            if FLAGS.profile_dir:
                tf.profiler.experimental.stop()

    if FLAGS.dataset:
        batches = tf.data.Dataset.from_tensor_slices((images, labels)).batch(FLAGS.batch_size)
        history = model.fit(batches, epochs=1, verbose=0, callbacks=[Timer()])
    else:
        history = model.fit(images, labels, batch_size=FLAGS.batch_size, epochs=1, verbose=0,
                            shuffle=False, callbacks=[Timer()])
    measured = step_times[FLAGS.warmup:]
    result = {
        "model": FLAGS.model,
        "device": FLAGS.device,
        "policy": FLAGS.policy,
        "dataset": FLAGS.dataset,
        "batch_size": FLAGS.batch_size,
        "steps": len(measured),
        "step_times": measured,
        "loss": history.history["loss"][-1],
        "per_step_counters": per_step_counters,
        "measured_counters": measured_counters,
        # Over the measured steps: {"voluntary": n, "involuntary": n} (this process only: a
        # remote configuration's server is not counted).
        "context_switches": switches,
        # The peak resident memory of this (TensorFlow) process, bytes (Linux: ru_maxrss KiB).
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if FLAGS.profile_dir:
        # The profiled steps' span on the host clock, from the first one's start to the last
        # one's end (what the account's window must match).
        result["profiled_span_s"] = profiled_span["end_s"] - profiled_span["begin_s"]
    if use_vgpu:
        import vgpu

        result["info"] = {k: vgpu.info()[k] for k in ("backends", "descriptor_mode")}
        result["iterations_detected"] = vgpu.stats()["iterations_detected"]
        # The graph optimizer's rewrites of the traced functions (docs/graph_fusions.md).
        result["graph_fusions"] = vgpu.stats()["graph_fusions"]
    print("VGPU_BENCH_RESULT " + json.dumps(result))


if __name__ == "__main__":
    app.run(main)
