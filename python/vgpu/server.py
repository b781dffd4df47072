"""``vgpu server``: hosts a backing executor (the CPU one by default) for many TensorFlow processes.

    vgpu server --listen unix:///tmp/vgpu.sock [--executor cpu] [--memory_limit 4GiB]
                [--client_quota 1GiB] [--token_file PATH] [--operator_token_file PATH]
                [--device_count 1] [--metrics_address PORT [--metrics_token_file PATH]]
    python -m vgpu.server --listen tcp://127.0.0.1:7000

Clients set ``VGPU_BACKEND`` to the same address (and ``VGPU_TOKEN_FILE`` when a token is
configured). The server is the standalone executable vgpu/bin/vgpu-server (plugin/server/
server_main.cc), which links no TensorFlow: this module parses the flags (the same as the
executable's) and replaces the process with it. SIGTERM and SIGINT stop the server cleanly:
every client is disconnected and its memory released.

With ``--metrics_address [HOST:]PORT`` this process stays: it runs vgpu-server as its child
(``--parent_pid``: the child stops when this process dies, even by SIGKILL), serves Prometheus
metrics at ``http://HOST:PORT/metrics`` (vgpu/metrics.py; a bare port is 127.0.0.1), passes
SIGTERM/SIGINT on and exits with the server's exit code. It asks the server for its statistics
as the operator (``--operator_token_file``; on a server with a token but no operator token it
makes one up, known only to the two processes). Who may see what: docs/security.md.
"""
from __future__ import annotations

import os
import subprocess
import sys

from absl import app, flags

from vgpu import _openmp

FLAGS = flags.FLAGS
flags.DEFINE_string("listen", None, "unix:///path/to.sock or tcp://host:port (port 0: any).")
flags.DEFINE_string("executor", "cpu", "The backing executor to host (`vgpu info` lists those "
                    "this build offers).")
flags.DEFINE_string("memory_limit", "1GiB", "Device memory per device, e.g. 4GiB.")
flags.DEFINE_string("client_quota", None, "Device memory one client may hold (default: no quota).")
flags.DEFINE_string("tenant_quota", None,
                    "Device memory the connections of a tenant (VGPU_TENANT) may hold together: "
                    "name=SIZE,name=SIZE,... (e.g. team-a=2GiB,team-b=512MiB).")
flags.DEFINE_string("metrics_address", None,
                    "Serve Prometheus metrics at http://HOST:PORT/metrics (HOST:PORT, or PORT "
                    "alone for 127.0.0.1; port 0: any free one, written to "
                    "--metrics_ready_file).")
flags.DEFINE_string("metrics_token_file", None,
                    "With --metrics_address: scrapers must send `Authorization: Bearer <the "
                    "token in this file>` (401 otherwise). Per-tenant series are exported only "
                    "with it, or on a server without --token_file/--operator_token_file.")
flags.DEFINE_integer("metrics_max_connections", 16,
                     "With --metrics_address: connections the endpoint serves at once (more are "
                     "closed at once).", lower_bound=1)
flags.DEFINE_string("metrics_ready_file", None,
                    "With --metrics_address: write the metrics endpoint's port here once serving.")
flags.DEFINE_string("token_file", None, "File holding the token clients must present.")
flags.DEFINE_string("operator_token_file", None,
                    "File holding the operator's token: an observer presenting it (`vgpu stats "
                    "--operator_token_file`) sees every connection and tenant; holders of the "
                    "--token_file token see only their own tenant (docs/security.md).")
flags.DEFINE_integer("device_count", 1, "Number of devices the server offers.")
flags.DEFINE_integer("compute_threads", 0, "Compute threads (0: one per core).")
flags.DEFINE_string("ready_file", None, "Write the bound address to this file once listening.")
flags.DEFINE_integer("max_streams_per_client", 256,
                     "Streams one client may have at once (each is a server thread).",
                     lower_bound=1)
flags.DEFINE_integer("max_streams", 4096,
                     "Streams of all clients together (each is a server thread); past it a new "
                     "stream is refused.", lower_bound=1)
# Limits against hostile or broken clients (docs/security.md; defaults in plugin/server/server.h,
# which vgpu-server's must match).
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
flags.DEFINE_bool("shared_memory", True,
                  "Accept a Unix-socket client's shared-memory staging region for bulk copies "
                  "(--noshared_memory: every byte through the socket).")
flags.DEFINE_string("max_shm_bytes", "256MiB",
                    "Largest shared-memory region one client may attach (also at most half of "
                    "--max_staging_bytes, whose budget it is charged to).")
flags.DEFINE_string("max_template_bytes", "4MiB",
                    "Launch templates one client connection may keep on the server (repeated "
                    "launches then cross as a template id and the buffers that changed); at most "
                    "an eighth of --max_staging_bytes, whose budget it is charged to. 0: none.")
flags.DEFINE_integer("max_connections", 256, "Open connections in all.")
flags.DEFINE_integer("max_connections_per_peer", 64,
                     "Open connections from one peer (IP address over TCP, uid over a Unix "
                     "socket).")
flags.DEFINE_integer("max_handshakes", 64,
                     "Connections that have not completed their Hello at once; a new one past it "
                     "closes the oldest, so that idle handshakes cannot lock clients out.",
                     lower_bound=1)
flags.DEFINE_string("min_receive_rate", "1MiB",
                    "Bytes per second a frame must arrive at, measured over windows of a few "
                    "seconds (a client holding receive budget with a trickle is closed).")
flags.DEFINE_integer("max_allocations_per_client", 65536,
                     "Device allocations one client may hold at once (each costs host "
                     "bookkeeping).", lower_bound=1)
flags.DEFINE_float("shutdown_timeout", 10.0,
                   "Seconds SIGTERM/SIGINT may take to disconnect every client (kernels running "
                   "are waited for) before the process exits anyway; a second signal exits at "
                   "once.")

# The flags above that belong to the server (cli.py defines others in the same FLAGS).
SERVER_FLAGS = ("listen", "executor", "memory_limit", "client_quota", "tenant_quota", "token_file",
                "operator_token_file", "device_count", "compute_threads", "ready_file",
                "max_streams_per_client", "max_streams", "max_staging_bytes",
                "max_receiving_bytes", "handshake_timeout", "frame_timeout", "fair_scheduling",
                "shared_memory", "max_shm_bytes", "max_template_bytes", "max_connections",
                "max_connections_per_peer", "max_handshakes", "min_receive_rate",
                "max_allocations_per_client", "shutdown_timeout")


def binary_path() -> str:
    """The installed standalone server, vgpu/bin/vgpu-server (it links no TensorFlow)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "vgpu-server")


def executors() -> list[tuple[str, str]]:
    """The backing executors the server offers: [(name, description)], the default first."""
    done = subprocess.run([binary_path(), "--list_executors"], capture_output=True, text=True,
                          check=True, timeout=60)
    return [tuple(line.split("\t", 1)) for line in done.stdout.splitlines() if line]


def _read_token(path: str | None) -> str:
    """The token in `path` without surrounding whitespace, "" for no path (`vgpu stats`)."""
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _read_required_token(flag: str, path: str) -> str:
    """The token in `path` (the value of --`flag`); ValueError if it cannot be read or holds
    none (an empty file must not mean "no authentication")."""
    try:
        token = _read_token(path)
    except OSError as error:
        raise ValueError(f"cannot read --{flag} {path}: {error.strerror}") from error
    if not token:
        raise ValueError(f"--{flag} {path} holds no token (it is empty or only whitespace)")
    return token


def _operator_token(folder: str, arguments: list[str]) -> str:
    """The token the metrics process asks the server with: the operator's (--operator_token_file);
    on a server with only --token_file, a new random one written to a file in `folder` (private:
    mkdtemp's 0700) and passed to the server in `arguments`; "" on a server without tokens (it
    shows everything to everyone)."""
    import secrets  # noqa: PLC0415

    if FLAGS.operator_token_file:
        return _read_required_token("operator_token_file", FLAGS.operator_token_file)
    if not FLAGS.token_file:
        return ""
    token = secrets.token_urlsafe(32)
    path = os.path.join(folder, "operator-token")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as f:
        f.write(token)
    arguments.append(f"--operator_token_file={path}")
    return token


def server_arguments() -> list[str]:
    """The server flags set on this process's command line, as vgpu-server's arguments. Only
    the flags given are passed on: the executable's defaults (the same as above) do the rest."""
    return [FLAGS[name].serialize() for name in SERVER_FLAGS if FLAGS[name].present]


def _serve_with_metrics(binary: str) -> int:
    """Runs vgpu-server as a child and serves its metrics until it exits; returns its exit code."""
    import signal  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    import time  # noqa: PLC0415

    from vgpu import metrics  # noqa: PLC0415 - prometheus_client, only in this mode

    try:
        host, _ = metrics.parse_address(FLAGS.metrics_address)
        metrics_token = (_read_required_token("metrics_token_file", FLAGS.metrics_token_file)
                         if FLAGS.metrics_token_file else "")
    except ValueError as error:
        print(f"vgpu server: {error}", file=sys.stderr)
        return 2
    # Tenant names are exported only to an authenticated scraper, or where every observer sees
    # them anyway (a server without tokens).
    per_tenant = bool(metrics_token) or not (FLAGS.token_file or FLAGS.operator_token_file)
    arguments = server_arguments()
    with tempfile.TemporaryDirectory(prefix="vgpu-server-") as folder:
        try:
            query_token = _operator_token(folder, arguments)
        except ValueError as error:
            print(f"vgpu server: {error}", file=sys.stderr)
            return 2
        ready = FLAGS.ready_file or os.path.join(folder, "ready")
        if not FLAGS.ready_file:
            arguments.append(f"--ready_file={ready}")
        # The child stops when this process dies, however it dies (PR_SET_PDEATHSIG there).
        arguments.append(f"--parent_pid={os.getpid()}")
        child = subprocess.Popen([binary, *arguments])
        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, lambda number, _frame: child.send_signal(number))
        while not os.path.exists(ready) and child.poll() is None:
            time.sleep(0.02)
        if child.poll() is not None:
            return child.returncode
        with open(ready, encoding="utf-8") as f:
            address = f.read().strip()
        try:
            http_server, port = metrics.serve(
                FLAGS.metrics_address, address, query_token, metrics_token=metrics_token,
                per_tenant=per_tenant, max_connections=FLAGS.metrics_max_connections)
        except OSError as error:
            print(f"vgpu server: cannot serve metrics at {FLAGS.metrics_address}: {error}",
                  file=sys.stderr)
            child.terminate()
            child.wait()
            return 1
        shown_host = f"[{host}]" if ":" in host else host
        print(f"vgpu server: metrics at http://{shown_host}:{port}/metrics"
              f"{' (bearer token required)' if metrics_token else ''}"
              f"{'' if per_tenant else ' (server-wide series only)'}", file=sys.stderr, flush=True)
        if FLAGS.metrics_ready_file:
            with open(FLAGS.metrics_ready_file + ".tmp", "w", encoding="utf-8") as f:
                f.write(str(port))
            os.replace(FLAGS.metrics_ready_file + ".tmp", FLAGS.metrics_ready_file)
        code = child.wait()
        http_server.shutdown()
        http_server.server_close()
        return code


def main(argv: list[str]) -> int:
    """Replaces this process with vgpu-server, passing the server flags on (the server then
    handles SIGTERM/SIGINT itself). Returns an exit code only if it cannot be started. With
    --metrics_address, runs it as a child instead and serves its metrics."""
    del argv
    binary = binary_path()
    if FLAGS.metrics_address:
        return _serve_with_metrics(binary)
    sys.stdout.flush()
    sys.stderr.flush()
    # oneDNN's OpenMP threads spin briefly, then sleep between kernels (vgpu/_openmp.py;
    # libgomp reads this when the server starts); the user's own settings win.
    _openmp.apply_defaults()
    try:
        os.execv(binary, [binary, *server_arguments()])
    except OSError as error:
        print(f"vgpu server: cannot run {binary}: {error}", file=sys.stderr)
        return 1


def run() -> None:
    """Entry point of ``python -m vgpu.server``."""
    app.run(lambda argv: sys.exit(main(argv)))


if __name__ == "__main__":
    run()
