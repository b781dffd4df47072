"""Access to the loaded plugin: devices, configuration and counters.

The plugin is loaded by TensorFlow itself (``import tensorflow``); this module never loads a
second copy. It finds the loaded ``libvgpu_plugin.so`` and reads its C API through ``vgpu._core``.
"""
from __future__ import annotations

import functools
import json
from typing import Any

PLATFORM_NAME = "VGPU"


class PluginNotLoadedError(RuntimeError):
    """TensorFlow has not loaded the vgpu plugin in this process."""


def _import_tensorflow():
    import tensorflow as tf  # noqa: PLC0415 - loading TensorFlow loads the plugin

    return tf


@functools.lru_cache(maxsize=1)
def _plugin():
    _import_tensorflow()
    from vgpu import _core  # noqa: PLC0415

    path = _core.find_loaded_plugin()
    if path is None:
        raise PluginNotLoadedError(
            "TensorFlow did not load the vgpu plugin: is tensorflow-vgpu installed in the same "
            "environment as tensorflow-cpu (site-packages/tensorflow-plugins/libvgpu_plugin.so)?"
        )
    return _core.Plugin(path)


def plugin_path() -> str:
    """Path of the plugin shared library TensorFlow loaded."""
    return _plugin().path


def info() -> dict[str, Any]:
    """The plugin's configuration as loaded: version, TensorFlow versions, device type and
    count, backends, descriptor mode, memory limit, and ``declined`` (why no device is offered,
    or None)."""
    result = json.loads(_plugin().info_json())
    result["plugin_path"] = plugin_path()
    return result


def ops() -> list[dict[str, Any]]:
    """Every op the plugin registered kernels for, sorted by name: ``op``, ``dtypes``,
    ``constraints`` (one string per registration), ``host_memory``, ``data_formats`` and
    ``notes``. docs/ops.md is generated from this list (``vgpu ops --markdown``)."""
    return json.loads(_plugin().op_catalog_json())


def devices() -> list[str]:
    """Names of the virtual GPUs TensorFlow discovered, e.g. ['/physical_device:GPU:0']."""
    tf = _import_tensorflow()
    device_type = info()["device_type"]
    return [d.name for d in tf.config.list_physical_devices(device_type)]


def is_available() -> bool:
    """True when the plugin is loaded and offers at least one virtual GPU."""
    try:
        return info()["device_count"] > 0
    except PluginNotLoadedError:
        return False


_SUMMED = (
    "commands_sent",
    "launches",
    "round_trips",
    "bytes_sent",
    "bytes_received",
    "bytes_to_device",
    "bytes_from_device",
    "allocations",
    "frees",
    "bytes_in_use",
    "peak_bytes_in_use",
    "descriptor_calls_local",
    "descriptor_calls_forwarded",
    "descriptor_settings_updates",
    "descriptor_queue_misses",
    "outputs_forwarded",
    "synchronizations_local",
    "events_completed_early",
)


def stats() -> dict[str, Any]:
    """Counters of the client runtime, summed over devices, with ``devices`` per device.

    Keys: ``commands`` (a dict: command kind -> count), ``commands_sent``, ``frames_sent``
    (frames written to remote backends: batched posted commands share one; 0 in process),
    ``wire`` (what went to remote backends, counted where it is written: {"frames", "bytes",
    "host_data_bytes" (host-to-device data inside those bytes), "templates_created",
    "launches_by_template"}; zeros in process), ``templates_created`` and
    ``launches_by_template`` (launch templates: a repeated launch sent as a template id plus the
    buffers that changed), ``command_bytes_sent`` (wire bytes minus host-to-device data),
    ``launches``,
    ``round_trips``, ``synchronizations_local`` (synchronisations of a remote device answered
    without a round trip: every command posted was known to have completed),
    ``events_completed_early`` (events complete when recorded, after host-to-device copies
    whose bytes were already taken), ``bytes_sent`` and ``bytes_received`` (protocol frames: commands out;
    replies and device-to-host data in; in-process, what the same frames would occupy on the
    wire), ``bytes_to_device``, ``bytes_from_device`` (tensor data copied), ``allocations``, ``frees``,
    ``bytes_in_use``, ``peak_bytes_in_use`` (summed over devices; the peak is the sum of
    per-device peaks), ``descriptor_calls`` (descriptor kind -> {"create", "set", "destroy"}),
    ``descriptor_calls_local``, ``descriptor_calls_forwarded``, ``descriptor_settings_updates``
    (reused descriptors whose settings changed), ``descriptor_queue_misses`` (creates the
    queues could not serve), ``outputs_forwarded`` (op outputs TensorFlow let take over an
    input's buffer: element-wise ops computed in place, as on TensorFlow's CPU), ``descriptor_mode``, ``warmup_complete`` (any device),
    ``iterations_detected`` (the most of any device), ``descriptor_queues`` (a list of
    {"device", "stream", "kind", "length"}), ``devices``: a list of {"ordinal", "backend", "counters"},
    and ``executor``: the in-process executor's own counters since it started, not reset by
    ``reset_stats()`` ({"name", "launches", "copies", "bytes_copied", "memsets",
    "descriptors_created", "primitives_created", "primitives_reused"}; None for devices on a
    server), also as ``executor_primitives_created`` / ``executor_primitives_reused``; and
    ``graph_fusions``: op pairs (and chains) the plugin's graph optimizer rewrote in this
    process, by rewrite ({"max_pool_grad_relu_grad", "max_pool_window_index",
    "conv_bias_activation", "matmul_bias_activation", "cast_from_host", "copy_from_host",
    "sign_bit", "cast_to_int32_on_host"}; counted per graph rewritten, not per step run, and not reset by
    ``reset_stats()``; docs/graph_fusions.md).
    """
    raw = json.loads(_plugin().stats_json())
    total: dict[str, Any] = {key: 0 for key in _SUMMED}
    commands: dict[str, int] = {}
    descriptor_calls: dict[str, dict[str, int]] = {}
    for device in raw["devices"]:
        counters = device["counters"]
        for key in _SUMMED:
            total[key] += counters[key]
        for kind, count in counters["commands"].items():
            commands[kind] = commands.get(kind, 0) + count
        for kind, verbs in counters["descriptor_calls"].items():
            summed = descriptor_calls.setdefault(kind, {verb: 0 for verb in verbs})
            for verb, count in verbs.items():
                summed[verb] += count
    total["commands"] = commands
    total["frames_sent"] = raw.get("frames_sent", 0)
    wire = raw.get("wire") or {}
    total["wire"] = wire
    total["templates_created"] = wire.get("templates_created", 0)
    total["launches_by_template"] = wire.get("launches_by_template", 0)
    total["command_bytes_sent"] = wire.get("bytes", 0) - wire.get("host_data_bytes", 0)
    total["descriptor_calls"] = descriptor_calls
    reuse = [device["descriptor_reuse"] for device in raw["devices"]]
    total["descriptor_mode"] = reuse[0]["mode"] if reuse else None
    total["warmup_complete"] = any(r["warmup_complete"] for r in reuse)
    total["iterations_detected"] = max((r["iterations_detected"] for r in reuse), default=0)
    total["descriptor_queues"] = [
        dict(queue, device=device["ordinal"])
        for device in raw["devices"]
        for queue in device["descriptor_reuse"]["queues"]
    ]
    total["devices"] = raw["devices"]
    executor = raw.get("executor")
    total["executor"] = executor
    total["executor_primitives_created"] = executor["primitives_created"] if executor else None
    total["executor_primitives_reused"] = executor["primitives_reused"] if executor else None
    total["graph_fusions"] = raw.get("graph_fusions", {})
    return total


def mark_step() -> None:
    """Marks the end of a training step on every virtual GPU. Descriptor reuse starts after the
    first completed step; the plugin also detects steps by itself (docs/method.md, claim 8), so this
    is a fallback for unusual models. Correctness never depends on it."""
    _plugin().mark_step()


def reset_stats() -> None:
    """Zeroes every counter (memory still in use stays counted)."""
    _plugin().reset_stats()
