"""Prometheus metrics of a running ``vgpu server``, for ``vgpu server --metrics_address``.

Each scrape of ``http://HOST:PORT/metrics`` asks the server for its statistics (the observer
role of the wire protocol: no tenant session, no device memory) and renders them with the
maintained ``prometheus_client`` library in Prometheus's text format. The library is used from
the Python wrapper rather than linked into vgpu-server so that the standalone server keeps
needing nothing but libc and libstdc++; a scrape costs one round trip to the server.

Per tenant (label ``tenant``; connections without VGPU_TENANT are tenant ``default``), summed
over the tenant's connections since the server started (counters) or now (gauges):
``vgpu_tenant_bytes_in_use``, ``vgpu_tenant_quota_bytes`` (0: no quota), ``vgpu_tenant_connections``,
``vgpu_tenant_commands_total``, ``vgpu_tenant_round_trips_total``, ``vgpu_tenant_launches_total``,
``vgpu_tenant_kernel_seconds_total``, ``vgpu_tenant_errors_total``. Server-wide: ``vgpu_up``,
``vgpu_connections``, ``vgpu_commands_total``, ``vgpu_streams``, ``vgpu_queued_commands``,
``vgpu_receiving_bytes``, ``vgpu_uptime_seconds``, and per device (label ``device``)
``vgpu_device_memory_bytes_in_use`` and ``vgpu_device_memory_limit_bytes``.
"""
from __future__ import annotations

import json
from typing import Callable, Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

_TENANT_GAUGES = (
    ("bytes_in_use", "vgpu_tenant_bytes_in_use", "Device memory the tenant's connections hold."),
    ("quota_bytes", "vgpu_tenant_quota_bytes", "The tenant's memory quota (0: none)."),
    ("connections", "vgpu_tenant_connections", "The tenant's open connections."),
)
_TENANT_COUNTERS = (
    ("commands", "vgpu_tenant_commands", "Commands received from the tenant."),
    ("round_trips", "vgpu_tenant_round_trips", "Commands the tenant waited for (calls)."),
    ("launches", "vgpu_tenant_launches", "Kernel launches run for the tenant."),
    ("errors", "vgpu_tenant_errors", "Refused commands and failed stream work of the tenant."),
)


class ServerCollector:
    """A prometheus_client collector that reads `fetch()` (the server's statistics JSON) on each
    scrape. A server that cannot be asked yields only ``vgpu_up 0``."""

    def __init__(self, fetch: Callable[[], str]):
        self._fetch = fetch

    def describe(self) -> list[Metric]:
        return []  # metrics depend on the server's tenants: no fixed description

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("vgpu_up", "Whether the server answered this scrape.")
        try:
            stats = json.loads(self._fetch())
        except Exception:  # noqa: BLE001 - any failure to ask is "down", not a broken scrape
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for key, name, text in (
            ("connections", "vgpu_connections", "Open connections (tenants and observers)."),
            ("streams", "vgpu_streams", "Streams open over all tenants."),
            ("queued_commands", "vgpu_queued_commands", "Commands queued on streams, not yet run."),
            ("receiving_bytes", "vgpu_receiving_bytes", "Bytes of partially received frames."),
            ("uptime_s", "vgpu_uptime_seconds", "Seconds since the server started."),
        ):
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], float(stats.get(key, 0)))
            yield gauge
        commands = CounterMetricFamily("vgpu_commands", "Commands received from all tenants.")
        commands.add_metric([], float(stats.get("commands_total", 0)))
        yield commands

        in_use = GaugeMetricFamily("vgpu_device_memory_bytes_in_use",
                                   "Device memory in use, all tenants.", labels=["device"])
        limit = GaugeMetricFamily("vgpu_device_memory_limit_bytes", "Device memory.",
                                  labels=["device"])
        for device in stats.get("devices", []):
            in_use.add_metric([str(device["device"])], float(device["bytes_in_use"]))
            limit.add_metric([str(device["device"])], float(device["limit_bytes"]))
        yield in_use
        yield limit

        tenants = stats.get("tenants", [])
        for key, name, text in _TENANT_GAUGES:
            gauge = GaugeMetricFamily(name, text, labels=["tenant"])
            for tenant in tenants:
                gauge.add_metric([tenant["name"]], float(tenant.get(key, 0)))
            yield gauge
        for key, name, text in _TENANT_COUNTERS:
            counter = CounterMetricFamily(name, text, labels=["tenant"])
            for tenant in tenants:
                counter.add_metric([tenant["name"]], float(tenant.get(key, 0)))
            yield counter
        kernel = CounterMetricFamily("vgpu_tenant_kernel_seconds",
                                     "Time the executor spent in the tenant's kernels.",
                                     labels=["tenant"])
        for tenant in tenants:
            kernel.add_metric([tenant["name"]], tenant.get("kernel_ns", 0) / 1e9)
        yield kernel


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (port 0: any free one) -> (host, port); ValueError with the reason."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics_address={text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def serve(address: str, server_address: str, token: str = "") -> tuple[object, int]:
    """Starts the /metrics HTTP endpoint on `address` (HOST:PORT) in a daemon thread, reading the
    server at `server_address`. Returns (the HTTP server, the bound port)."""
    from vgpu import _core  # noqa: PLC0415 - the observer client

    host, port = parse_address(address)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServerCollector(lambda: _core.query_server_stats(server_address, token)))
    http_server, _thread = start_http_server(port, addr=host, registry=registry)
    return http_server, http_server.server_port
