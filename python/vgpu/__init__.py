"""tensorflow-vgpu: a virtual GPU for TensorFlow.

Installing the package puts the PluggableDevice plugin into ``site-packages/tensorflow-plugins``;
``import tensorflow`` then discovers ``GPU:0`` (platform ``VGPU``). This module reads the plugin's
counters and configuration from the instance TensorFlow loaded:

    import vgpu
    vgpu.is_available()   # True when TensorFlow offers at least one virtual GPU
    vgpu.devices()        # ['/physical_device:GPU:0', ...]
    vgpu.stats()          # counters: commands by kind, round trips, bytes, allocations
    vgpu.reset_stats()
    vgpu.mark_step()      # explicit training-step boundary (optional)

Keras helpers live in ``vgpu.keras`` (imported on demand).
"""
from vgpu._version import __version__
from vgpu._plugin import (
    PluginNotLoadedError,
    devices,
    info,
    is_available,
    mark_step,
    ops,
    reset_stats,
    stats,
)

__all__ = [
    "PluginNotLoadedError",
    "__version__",
    "devices",
    "info",
    "is_available",
    "mark_step",
    "ops",
    "reset_stats",
    "stats",
]
