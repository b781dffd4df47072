"""Keras helpers for the virtual GPU.

``VgpuStepCallback`` marks every training step as an iteration boundary (the explicit fallback
of the descriptor-reuse method; the plugin also detects boundaries by itself) and shows, in the
progress bar, how many descriptor calls were forwarded to the backing executor and how many
round trips a step cost:

    model.fit(x, y, callbacks=[vgpu.keras.VgpuStepCallback()])
    # 32/32 - 1s - loss: 2.2 - fwd_desc: 0.0 - round_trips: 3.0
"""
from __future__ import annotations

import keras

from vgpu import _plugin


class VgpuStepCallback(keras.callbacks.Callback):
    """Marks step boundaries and reports per-step vgpu counters in the training logs.

    Args:
      mark_steps: call ``vgpu.mark_step()`` after every training batch.
      show_stats: add ``fwd_desc`` (descriptor calls forwarded) and ``round_trips`` of the
        step to the logs, so that the progress bar shows them.
    """

    def __init__(self, mark_steps: bool = True, show_stats: bool = True):
        super().__init__()
        self.mark_steps = mark_steps
        self.show_stats = show_stats
        self._before = None
        self.history: list[dict[str, int]] = []

    def on_train_batch_begin(self, batch, logs=None):
        if self.show_stats:
            self._before = _plugin.stats()

    def on_train_batch_end(self, batch, logs=None):
        if self.mark_steps:
            _plugin.mark_step()
        if self.show_stats and self._before is not None:
            after = _plugin.stats()
            step = {
                "fwd_desc": after["descriptor_calls_forwarded"]
                - self._before["descriptor_calls_forwarded"],
                "round_trips": after["round_trips"] - self._before["round_trips"],
            }
            self.history.append(step)
            if logs is not None:
                logs.update(step)
