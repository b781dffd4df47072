"""Keras helpers for the virtual GPU.

``VgpuStepCallback`` marks every training step as an iteration boundary (the explicit fallback
of the descriptor-reuse method; the plugin also detects boundaries by itself) and shows, in the
progress bar, how many descriptor calls were forwarded to the backing executor and how many
round trips a step cost:

    model.fit(x, y, callbacks=[vgpu.keras.VgpuStepCallback()])
    # 32/32 - 1s - loss: 2.2 - fwd_desc: 0.0 - round_trips: 3.0

With ``log_dir`` it also writes each step's counters as TensorBoard scalars (``tf.summary``),
so that a run's curves show the method's warm-up and its steady state:

    model.fit(x, y, callbacks=[vgpu.keras.VgpuStepCallback(log_dir="logs/run1")])
    # tensorboard --logdir logs: vgpu/descriptor_calls_forwarded, vgpu/round_trips, ...
"""
from __future__ import annotations

import keras

from vgpu import _plugin

# The per-step scalars: name under "vgpu/" -> how to read it from two vgpu.stats() documents.
_SCALARS = {
    "descriptor_calls_forwarded": lambda s: s["descriptor_calls_forwarded"],
    "descriptor_calls_local": lambda s: s["descriptor_calls_local"],
    "round_trips": lambda s: s["round_trips"],
    "commands_sent": lambda s: s["commands_sent"],
    "launches": lambda s: s["launches"],
    "bytes_sent": lambda s: s["bytes_sent"],
    "bytes_received": lambda s: s["bytes_received"],
}


def _scalar_metadata():
    """What marks a summary as a TensorBoard scalar (its "scalars" plugin)."""
    from tensorflow.core.framework import summary_pb2  # noqa: PLC0415

    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
        data_class=summary_pb2.DATA_CLASS_SCALAR)


def _executor_ms(stats):
    """Milliseconds the in-process executor spent in kernels so far (None through a server,
    whose kernel times stay on the server: see `vgpu stats` there, or the profiler)."""
    executor = stats.get("executor")
    if not executor or "kernel_ns" not in executor:
        return None
    return executor["kernel_ns"] / 1e6


class VgpuStepCallback(keras.callbacks.Callback):
    """Marks step boundaries and reports per-step vgpu counters.

    Args:
      mark_steps: call ``vgpu.mark_step()`` after every training batch.
      show_stats: add ``fwd_desc`` (descriptor calls forwarded) and ``round_trips`` of the
        step to the logs, so that the progress bar shows them.
      log_dir: if given, write each step's counters as TensorBoard scalars to this folder
        (a ``tf.summary`` file writer of its own): ``vgpu/descriptor_calls_forwarded``,
        ``vgpu/descriptor_calls_local``, ``vgpu/round_trips``, ``vgpu/commands_sent``,
        ``vgpu/launches``, ``vgpu/bytes_sent``, ``vgpu/bytes_received`` and, in process,
        ``vgpu/executor_ms`` (the executor's kernel time), at the step's global index.
    """

    def __init__(self, mark_steps: bool = True, show_stats: bool = True,
                 log_dir: str | None = None):
        super().__init__()
        self.mark_steps = mark_steps
        self.show_stats = show_stats
        self.log_dir = log_dir
        self._before = None
        self._writer = None
        self._step = 0
        self.history: list[dict[str, int]] = []

    def _counting(self):
        return self.show_stats or self.log_dir is not None

    def on_train_begin(self, logs=None):
        if self.log_dir is not None and self._writer is None:
            import tensorflow as tf  # noqa: PLC0415 - only with log_dir

            self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_train_batch_begin(self, batch, logs=None):
        if self._counting():
            self._before = _plugin.stats()

    def on_train_batch_end(self, batch, logs=None):
        if self.mark_steps:
            _plugin.mark_step()
        if not self._counting() or self._before is None:
            return
        after = _plugin.stats()
        if self.show_stats:
            step = {
                "fwd_desc": after["descriptor_calls_forwarded"]
                - self._before["descriptor_calls_forwarded"],
                "round_trips": after["round_trips"] - self._before["round_trips"],
            }
            self.history.append(step)
            if logs is not None:
                logs.update(step)
        if self._writer is not None:
            self._write_scalars(self._before, after)
        self._step += 1

    def _write_scalars(self, before, after):
        import tensorflow as tf  # noqa: PLC0415

        values = {name: read(after) - read(before) for name, read in _SCALARS.items()}
        executor_before, executor_after = _executor_ms(before), _executor_ms(after)
        if executor_before is not None and executor_after is not None:
            values["executor_ms"] = executor_after - executor_before
        # TensorBoard's scalar summaries, written with TensorFlow's own summary op (TensorBoard
        # itself need not be installed), on the host: the values are host numbers.
        with self._writer.as_default(step=self._step), tf.device("CPU:0"):
            for name, value in values.items():
                tf.summary.write(f"vgpu/{name}", tf.constant(value, tf.float32),
                                 metadata=_scalar_metadata())

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()
