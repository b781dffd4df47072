"""``vgpu server``: hosts a backing executor (the CPU one by default) for many TensorFlow processes.

    vgpu server --listen unix:///tmp/vgpu.sock [--executor cpu] [--memory_limit 4GiB]
                [--client_quota 1GiB] [--token_file PATH] [--device_count 1]
    python -m vgpu.server --listen tcp://127.0.0.1:7000

Clients set ``VGPU_BACKEND`` to the same address (and ``VGPU_TOKEN_FILE`` when a token is
configured). SIGTERM and SIGINT stop the server cleanly: every client is disconnected and its
memory released. The server does not import TensorFlow.
"""
from __future__ import annotations

import signal
import sys
import threading

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("listen", None, "unix:///path/to.sock or tcp://host:port (port 0: any).")
flags.DEFINE_string("executor", "cpu", "The backing executor to host (`vgpu info` lists those "
                    "this build offers).")
flags.DEFINE_string("memory_limit", "1GiB", "Device memory per device, e.g. 4GiB.")
flags.DEFINE_string("client_quota", None, "Device memory one client may hold (default: no quota).")
flags.DEFINE_string("token_file", None, "File holding the token clients must present.")
flags.DEFINE_integer("device_count", 1, "Number of devices the server offers.")
flags.DEFINE_integer("compute_threads", 0, "Compute threads (0: one per core).")
flags.DEFINE_string("ready_file", None, "Write the bound address to this file once listening.")
flags.DEFINE_integer("max_streams_per_client", 256,
                     "Streams one client may have at once (each is a server thread).",
                     lower_bound=1)
# Limits against hostile or broken clients (docs/security.md; defaults in plugin/server/server.h).
flags.DEFINE_string("max_staging_bytes", "256MiB",
                    "Host memory one client may hold in flight (device-to-host data not yet "
                    "taken, host-to-device data not yet executed); past it the server reads no "
                    "more of its commands until earlier ones are done.")
flags.DEFINE_string("max_receiving_bytes", "512MiB",
                    "Bytes of partially received frames over all clients.")
flags.DEFINE_float("handshake_timeout", 10.0,
                   "Seconds a new connection has to complete its Hello before it is closed.")
flags.DEFINE_float("frame_timeout", 30.0,
                   "Seconds a frame may stall (bytes stop arriving, or the client stops taking "
                   "its data) before the connection is closed.")
flags.DEFINE_bool("fair_scheduling", True,
                  "Share the compute pool fairly among clients (off: Eigen's pool, for one "
                  "trusted client).")
flags.DEFINE_integer("max_connections", 256, "Open connections in all.")
flags.DEFINE_integer("max_connections_per_peer", 64,
                     "Open connections from one peer (IP address over TCP, uid over a Unix "
                     "socket).")

_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_byte_size(text: str) -> int:
    """'512MiB' -> 536870912 (the units of VGPU_MEMORY_LIMIT)."""
    s = text.strip().lower()
    i = 0
    while i < len(s) and (s[i].isdigit() or s[i] == "."):
        i += 1
    number, unit = s[:i], s[i:].strip()
    if not number or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a byte size (e.g. 512MiB, 4GiB)")
    value = int(float(number) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"{text!r} is not a usable byte size")
    return value


def _read_token(path: str | None) -> str:
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _limits_from_flags() -> dict[str, int]:
    """The server limits set by flags, by Server::Options name."""
    def seconds(value: float, flag: str) -> int:
        if not value > 0:
            raise ValueError(f"--{flag} must be a positive number of seconds")
        return max(1, int(value * 1000))

    for flag in ("max_connections", "max_connections_per_peer"):
        if FLAGS[flag].value < 1:
            raise ValueError(f"--{flag} must be at least 1")
    return {
        "max_staging_bytes": parse_byte_size(FLAGS.max_staging_bytes),
        "max_receiving_bytes": parse_byte_size(FLAGS.max_receiving_bytes),
        "handshake_timeout_ms": seconds(FLAGS.handshake_timeout, "handshake_timeout"),
        "frame_timeout_ms": seconds(FLAGS.frame_timeout, "frame_timeout"),
        "max_connections": FLAGS.max_connections,
        "max_connections_per_peer": FLAGS.max_connections_per_peer,
        "max_streams_per_client": FLAGS.max_streams_per_client,
        "fair_scheduling": int(FLAGS.fair_scheduling),
    }


def serve(listen: str, memory_limit: int, device_count: int = 1, client_quota: int = 0,
          token: str = "", compute_threads: int = 0, ready_file: str | None = None,
          limits: dict[str, int] | None = None, executor: str = "cpu") -> int:
    """Runs a server until SIGTERM/SIGINT. Returns the process exit code. `limits`: see
    _limits_from_flags (unset ones keep the server's defaults); `executor`: a registered
    backing executor's name."""
    from vgpu import _core  # noqa: PLC0415

    server = _core.Server(listen, memory_limit, device_count, client_quota, token,
                          compute_threads, limits or {}, executor)
    print(f"vgpu server: listening on {server.address}", file=sys.stderr, flush=True)
    if ready_file:
        with open(ready_file + ".tmp", "w", encoding="utf-8") as f:
            f.write(server.address)
        import os  # noqa: PLC0415

        os.replace(ready_file + ".tmp", ready_file)
    failure: list[BaseException] = []

    def run():
        try:
            server.serve()
        except BaseException as error:  # noqa: BLE001 - reported below
            failure.append(error)

    thread = threading.Thread(target=run, name="vgpu-server", daemon=True)
    thread.start()

    def stop(signum, frame):  # noqa: ARG001
        server.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while thread.is_alive():  # Python runs signal handlers here, on the main thread
        thread.join(0.2)
    if failure:
        print(f"vgpu server: {failure[0]}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    del argv
    if not FLAGS.listen:
        print("vgpu server: --listen unix:///path or tcp://host:port is required", file=sys.stderr)
        return 2
    try:
        memory_limit = parse_byte_size(FLAGS.memory_limit)
        quota = parse_byte_size(FLAGS.client_quota) if FLAGS.client_quota else 0
        token = _read_token(FLAGS.token_file)
        return serve(FLAGS.listen, memory_limit, FLAGS.device_count, quota, token,
                     FLAGS.compute_threads, FLAGS.ready_file, _limits_from_flags(),
                     FLAGS.executor.strip().lower())
    except (ValueError, OSError, RuntimeError) as error:
        print(f"vgpu server: {error}", file=sys.stderr)
        return 1


def run() -> None:
    """Entry point of ``python -m vgpu.server``."""
    app.run(lambda argv: sys.exit(main(argv)))


if __name__ == "__main__":
    run()
