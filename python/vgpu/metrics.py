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

Who may see what (docs/security.md): the per-tenant series name the tenants of the server, so
they are exported only when the endpoint requires its own token (``--metrics_token_file``:
``Authorization: Bearer <token>``, 401 otherwise) or when the server has no token at all (then
any local observer sees every tenant anyway); otherwise only the server-wide series are. The
endpoint is a small HTTP server of its own (not prometheus_client's): it answers at most
``max_connections`` connections at once (more are closed at once), closes a connection whose
request has not been read ``REQUEST_TIMEOUT_S`` after it was accepted (a request trickling in a
byte at a time included), and when accept() runs out of file
descriptors it closes the waiting connection through a reserved descriptor and backs off for
``ACCEPT_BACKOFF_S`` instead of spinning.
"""
from __future__ import annotations

import errno
import hmac
import http.server
import json
import os
import socket
import sys
import threading
import time
from typing import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

# The host of a --metrics_address given as a bare port: only this machine may scrape.
DEFAULT_HOST = "127.0.0.1"
# Connections the endpoint serves at once (--metrics_max_connections); more are closed at once.
DEFAULT_MAX_CONNECTIONS = 16
# Seconds a scraper has, from its connection, to send its whole request: then the connection is
# closed, however its bytes trickle. (Each later read or write has as long again; the answer,
# a few KiB, fits the socket's buffer whether or not the scraper reads it.)
REQUEST_TIMEOUT_S = 5.0
# After accept() failed for lack of file descriptors (or memory), the listener rests this long.
ACCEPT_BACKOFF_S = 0.1
# Waiting connections closed per back-off, one after another on the reserve descriptor.
REFUSALS_PER_BACK_OFF = 128
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

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
    scrape. A server that cannot be asked yields only ``vgpu_up 0``. Without `per_tenant` the
    series labelled with tenant names are left out (server-wide series only)."""

    def __init__(self, fetch: Callable[[], str], per_tenant: bool = True):
        self._fetch = fetch
        self._per_tenant = per_tenant

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

        if not self._per_tenant:
            return
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
    """HOST:PORT or a bare PORT (host 127.0.0.1; port 0: any free one) -> (host, port);
    ValueError with the reason."""
    if text.isdigit():
        host, port = DEFAULT_HOST, text
    else:
        host, sep, port = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"--metrics_address={text!r} is not HOST:PORT or PORT")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics_address={text!r} is not HOST:PORT or PORT")
    return host.strip("[]"), int(port)


class _MetricsHandler(http.server.BaseHTTPRequestHandler):
    """GET /metrics (or /): the registry in Prometheus's text format, after the bearer token
    when the server has one. One request per connection (HTTP/1.0)."""

    timeout = REQUEST_TIMEOUT_S  # each socket operation's (StreamRequestHandler.setup)
    server: "MetricsHTTPServer"

    def setup(self) -> None:
        self.timeout = self.server.request_timeout_s
        super().setup()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.request_read(self.request)  # its deadline is met: collecting may take longer
        return parsed

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        if path not in ("/metrics", "/"):
            self._answer(404, b"not found: the metrics are at /metrics\n")
            return
        if not self.server.authorized(self.headers.get("Authorization", "")):
            self._answer(401, b"a bearer token is required (Authorization: Bearer <token>)\n",
                         {"WWW-Authenticate": 'Bearer realm="vgpu metrics"'})
            return
        self._answer(200, generate_latest(self.server.registry),
                     {"Content-Type": CONTENT_TYPE_LATEST})

    def _answer(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for name, value in {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args) -> None:  # noqa: A002 - http.server's signature
        del format, args  # a scrape every few seconds would flood the server's log


class _RequestDeadline:
    """Shuts a connection's socket down `seconds` after it was accepted unless its request was
    read before (disarm): a request trickling in a byte at a time cannot hold a slot. Never
    touches the socket once disarmed (it may be closed, its descriptor reused)."""

    def __init__(self, sock: socket.socket, seconds: float):
        self._sock = sock
        self._lock = threading.Lock()
        self._armed = True
        self._timer = threading.Timer(seconds, self._cut_off)
        self._timer.daemon = True

    def start(self) -> None:
        self._timer.start()

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
        self._timer.cancel()

    def _cut_off(self) -> None:
        with self._lock:
            if self._armed:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)  # the handler's read ends
                except OSError:
                    pass


def _open_reserve() -> int:
    """The descriptor the accept loop keeps to accept-and-close when out of descriptors."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


class MetricsHTTPServer(http.server.HTTPServer):
    """The /metrics endpoint: a thread per connection, at most `max_connections` at once (more
    are closed at once); `token` (if not empty) required as ``Authorization: Bearer``; out of
    file descriptors, accept backs off instead of spinning. Call serve_forever() in a thread."""

    allow_reuse_address = True
    request_queue_size = 64  # the listener's backlog, as the server's (http.server's: 5)

    def __init__(self, host: str, port: int, registry: CollectorRegistry, token: str = "",
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 request_timeout_s: float = REQUEST_TIMEOUT_S):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.registry = registry
        self.request_timeout_s = request_timeout_s
        self._deadlines: dict[socket.socket, _RequestDeadline] = {}
        self._deadlines_lock = threading.Lock()
        self._token = f"Bearer {token}".encode() if token else b""
        self._slots = threading.BoundedSemaphore(max(1, max_connections))
        # Closed to accept-and-close the waiting client when out of descriptors (then reopened).
        self._reserve = _open_reserve()
        self._last_report = 0.0
        super().__init__((host, port), _MetricsHandler)
        self.socket.setblocking(False)  # accept never blocks the loop (a client may leave)

    def authorized(self, header: str) -> bool:
        """Whether an Authorization header value grants access (compared in constant time)."""
        return not self._token or hmac.compare_digest(header.encode("latin-1", "replace"),
                                                      self._token)

    def get_request(self):
        # The reserve first. Another thread (a scrape opens a socket to the server) can take the
        # descriptor freed between closing a waiting connection and reopening the reserve; were
        # the one it gives back handed to a connection, the next time descriptors run out no
        # waiting client could be closed and the backlog would keep the listener readable.
        if self._reserve < 0:
            try:
                self._reserve = _open_reserve()
            except OSError as error:
                if error.errno in _OUT_OF_RESOURCES:
                    self._back_off(error)
                raise  # serve_forever skips this round
        try:
            return self.socket.accept()
        except OSError as error:
            if error.errno in _OUT_OF_RESOURCES:
                served = self._refuse_waiting_and_back_off(error)
                if served is not None:
                    return served
            raise  # serve_forever skips this round

    def _refuse_waiting_and_back_off(self, error: OSError) -> tuple | None:
        """Out of descriptors: closes the waiting connections (up to REFUSALS_PER_BACK_OFF), one
        after another through the reserve, so that the backlog drains instead of keeping the
        listener readable; then rests ACCEPT_BACKOFF_S. If descriptors come back meanwhile (the
        reserve opens again beside a connection just accepted), returns that connection's
        (socket, address) to be served instead, without resting; otherwise None."""
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1
        for _ in range(REFUSALS_PER_BACK_OFF):
            try:
                waiting = self.socket.accept()
            except OSError:
                break  # nobody left waiting, or the descriptor was taken meanwhile
            try:
                self._reserve = _open_reserve()
                return waiting
            except OSError:
                waiting[0].close()
        try:
            self._reserve = _open_reserve()
        except OSError:
            self._reserve = -1  # taken again before the next accept
        self._back_off(error)
        return None

    def _back_off(self, error: OSError) -> None:
        """Reports (at most once a second) that accept() ran out of resources; rests
        ACCEPT_BACKOFF_S."""
        now = time.monotonic()
        if now - self._last_report >= 1.0:
            print(f"vgpu server: metrics endpoint cannot accept connections: {error.strerror}; "
                  "backing off", file=sys.stderr, flush=True)
            self._last_report = now
        time.sleep(ACCEPT_BACKOFF_S)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: closed, the scraper retries
            return
        thread = threading.Thread(target=self._serve_one, args=(request, client_address),
                                  name="vgpu-metrics", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread to be had
            self._slots.release()
            self.shutdown_request(request)

    def request_read(self, request) -> None:
        """The handler has read `request`'s whole request: its deadline no longer applies."""
        with self._deadlines_lock:
            deadline = self._deadlines.pop(request, None)
        if deadline is not None:
            deadline.disarm()

    def _serve_one(self, request, client_address) -> None:
        # A deadline for the request: the handler's socket timeout only bounds each read, so a
        # request sent a byte every few seconds would hold its slot for ever.
        deadline = _RequestDeadline(request, self.request_timeout_s)
        with self._deadlines_lock:
            self._deadlines[request] = deadline
        try:
            deadline.start()
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001, S110 - a scraper that misbehaves only ends its connection
            pass
        finally:
            self.request_read(request)  # disarmed before the socket is closed
            self.shutdown_request(request)
            self._slots.release()

    def server_close(self) -> None:
        super().server_close()
        if self._reserve >= 0:
            os.close(self._reserve)
            self._reserve = -1


def serve(address: str, server_address: str, token: str = "", *, metrics_token: str = "",
          per_tenant: bool = True,
          max_connections: int = DEFAULT_MAX_CONNECTIONS) -> tuple[MetricsHTTPServer, int]:
    """Starts the /metrics HTTP endpoint on `address` (HOST:PORT, or PORT for 127.0.0.1) in a
    daemon thread, reading the server at `server_address` as the holder of `token` (the operator
    token, for the full view). `metrics_token`: required of scrapers (empty: none);
    `per_tenant`: export the series labelled with tenant names. Returns (the HTTP server, the
    bound port); stop it with shutdown() and server_close()."""
    from vgpu import _core  # noqa: PLC0415 - the observer client

    host, port = parse_address(address)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServerCollector(lambda: _core.query_server_stats(server_address, token),
                                      per_tenant=per_tenant))
    http_server = MetricsHTTPServer(host, port, registry, metrics_token, max_connections)
    threading.Thread(target=http_server.serve_forever, name="vgpu-metrics-accept",
                     daemon=True).start()
    return http_server, http_server.server_address[1]
