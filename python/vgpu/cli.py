"""The ``vgpu`` command line: ``vgpu info`` (what TensorFlow sees and how the plugin is set up),
``vgpu server`` (a remote backing executor, see vgpu/server.py), ``vgpu stats --server
ADDRESS`` (clients, memory per client and commands per second of a running server), ``vgpu
ops`` (the ops the virtual GPU runs; ``--markdown`` prints docs/ops.md), ``vgpu bench`` (the
benchmark suite, see vgpu/bench/runner.py) and ``vgpu trace replay|stats FILE`` (command traces
recorded with VGPU_TRACE, see docs/traces.md)."""
from __future__ import annotations

import json
import os
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
from vgpu import server as _server  # noqa: E402 - defines the server's flags
from vgpu.bench import runner as _bench  # noqa: E402 - defines the benchmark's flags

flags.DEFINE_bool("json", False, "Print machine-readable JSON instead of text.")
flags.DEFINE_string("server", None, "vgpu stats: address of a running vgpu server.")
flags.DEFINE_float("interval", 1.0, "vgpu stats: seconds between the two samples of a rate.")
flags.DEFINE_bool("watch", False, "vgpu stats: refresh the table every --interval seconds until "
                  "interrupted.")
flags.DEFINE_integer("watch_count", 0, "vgpu stats --watch: stop after this many refreshes "
                     "(0: until interrupted).")
flags.DEFINE_bool("markdown", False, "vgpu ops: print the Markdown of docs/ops.md.")
flags.DEFINE_float("rtol", 1e-5, "vgpu trace replay: relative tolerance of float32 results.")
flags.DEFINE_float("atol", 1e-6, "vgpu trace replay: absolute tolerance of float32 results.")
flags.DEFINE_float("wait_timeout", None,
                   "vgpu trace replay|stats: seconds to wait for a notification or a copy before "
                   "its record fails (default 10).")

# One line per command: what `vgpu --help` (and a missing or unknown command) prints.
COMMAND_SUMMARIES = (
    ("info", "the plugin path, TensorFlow version, devices, backend and limits"),
    ("server", "run a vgpu server (--listen unix:///PATH or tcp://HOST:PORT, --memory_limit, ...)"),
    ("stats", "clients, memory per client and commands per second of a server (--server ADDR)"),
    ("ops", "the ops the virtual GPU runs and their dtypes (--markdown: docs/ops.md; --json)"),
    ("bench", "the benchmark suite: models, transports, bandwidth (--quick, --out DIR, ...)"),
    ("trace", "replay a command trace recorded with VGPU_TRACE, or its statistics "
              "(trace replay|stats FILE)"),
)


def usage_text() -> str:
    """The command list: a usage line, then one line per command."""
    width = max(len(name) for name, _ in COMMAND_SUMMARIES)
    lines = ["usage: vgpu <command> [flags]", "", "commands:"]
    lines += [f"  {name:<{width}}  {summary}" for name, summary in COMMAND_SUMMARIES]
    lines += ["", "vgpu <command> --helpfull lists every flag; docs/ in the repository has the "
              "details."]
    return "\n".join(lines) + "\n"


_HELP_ARGUMENTS = ("--help", "-help", "-h", "-?", "--helpshort", "help")


def _format_bytes(count: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def _info() -> int:
    import vgpu  # noqa: PLC0415 - imports TensorFlow, which is slow: only when asked

    try:
        details = vgpu.info()
    except vgpu.PluginNotLoadedError as error:
        print(f"vgpu: {error}", file=sys.stderr)
        return 1
    details["devices"] = vgpu.devices()
    if FLAGS.json:
        print(json.dumps(details, indent=2))
        return 0
    print(f"tensorflow-vgpu {details['version']}")
    print(f"plugin:            {details['plugin_path']}")
    print(f"TensorFlow:        {details['tensorflow_running']} "
          f"(built against {details['tensorflow_built_against']})")
    print(f"platform / type:   {details['platform']} / {details['device_type']}")
    print(f"devices:           {', '.join(details['devices']) or 'none'}")
    print(f"backends:          {', '.join(details['backends'])}")
    print(f"executor:          {details['executor']} (in-process devices; this build offers: "
          f"{details['executors_available']})")
    print(f"descriptor mode:   {details['descriptor_mode']}")
    print(f"memory per device: {_format_bytes(details['memory_limit_bytes'])}")
    print(f"command trace:     {details.get('trace') or 'off (VGPU_TRACE unset)'}")
    if details["declined"]:
        print(f"NO DEVICE OFFERED: {details['declined']}")
        return 1
    return 0


def _with_rates(first: dict, second: dict) -> dict:
    """`second` with per-second rates over the interval since `first` (same server)."""
    elapsed = max(second["uptime_s"] - first["uptime_s"], 1e-9)
    second["commands_per_s"] = (second["commands_total"] - first["commands_total"]) / elapsed
    clients_before = {c["id"]: c for c in first["clients"]}
    for client in second["clients"]:
        before = clients_before.get(client["id"], {})
        client["commands_per_s"] = (client["commands"] - before.get("commands", 0)) / elapsed
        client["launches_per_s"] = (client.get("launches", 0) - before.get("launches", 0)) / elapsed
    tenants_before = {t["name"]: t for t in first.get("tenants", [])}
    for tenant in second.get("tenants", []):
        before = tenants_before.get(tenant["name"], {})
        tenant["commands_per_s"] = (tenant["commands"] - before.get("commands", 0)) / elapsed
        tenant["launches_per_s"] = (tenant["launches"] - before.get("launches", 0)) / elapsed
    return second


def _stats_table(stats: dict) -> str:
    """The text `vgpu stats` prints: the server, its devices, a row per tenant and per client."""
    lines = [f"vgpu server {stats['address']} up {stats['uptime_s']:.0f} s, "
             f"{len(stats['clients'])} client(s), {stats['commands_per_s']:.0f} commands/s"]
    for device in stats["devices"]:
        lines.append(f"  device {device['device']}: {_format_bytes(device['bytes_in_use'])} of "
                     f"{_format_bytes(device['limit_bytes'])} in use")
    tenants = stats.get("tenants", [])
    if tenants:
        lines.append(f"  {'tenant':<20} {'conns':>5} {'memory':>10} {'quota':>10} "
                     f"{'launches/s':>10} {'commands/s':>10} {'errors':>7}")
        for tenant in tenants:
            quota = _format_bytes(tenant["quota_bytes"]) if tenant["quota_bytes"] else "-"
            lines.append(f"  {tenant['name']:<20} {tenant['connections']:>5} "
                         f"{_format_bytes(tenant['bytes_in_use']):>10} {quota:>10} "
                         f"{tenant['launches_per_s']:>10.0f} {tenant['commands_per_s']:>10.0f} "
                         f"{tenant['errors']:>7}")
    for client in stats["clients"]:
        tenant = f" tenant {client['tenant']}" if client.get("tenant") else ""
        peer = f" ({client['peer']})" if "peer" in client else ""
        lines.append(f"  client {client['id']}{peer}{tenant}: "
                     f"{_format_bytes(client['bytes_in_use'])}, {client['commands']} commands, "
                     f"{client['commands_per_s']:.0f}/s")
    return "\n".join(lines) + "\n"


def _stats() -> int:
    from vgpu import _core  # noqa: PLC0415 - no TensorFlow needed

    if not FLAGS.server:
        print("vgpu stats: --server unix:///path or tcp://host:port is required", file=sys.stderr)
        return 2
    # The operator token shows every tenant; the tenant token only the tenant VGPU_TENANT names
    # (docs/security.md).
    token = _server._read_token(FLAGS.operator_token_file or FLAGS.token_file)  # noqa: SLF001
    tenant = os.environ.get("VGPU_TENANT", "")
    interval = max(FLAGS.interval, 0.05)
    refreshes = 0
    try:
        previous = json.loads(_core.query_server_stats(FLAGS.server, token, tenant=tenant))
        while True:
            time.sleep(interval)  # a rate needs two samples
            current = json.loads(_core.query_server_stats(FLAGS.server, token, tenant=tenant))
            stats = _with_rates(previous, dict(current))
            if FLAGS.json:
                print(json.dumps(stats, indent=2), flush=True)
            else:
                if FLAGS.watch and sys.stdout.isatty():
                    sys.stdout.write("\x1b[H\x1b[2J")  # clear the terminal between tables
                sys.stdout.write(_stats_table(stats))
                sys.stdout.flush()
            refreshes += 1
            if not FLAGS.watch or (FLAGS.watch_count and refreshes >= FLAGS.watch_count):
                return 0
            previous = current
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, ValueError) as error:
        print(f"vgpu stats: {error}", file=sys.stderr)
        return 1


def _ops() -> int:
    from vgpu import ops_doc  # noqa: PLC0415 - imports TensorFlow

    if FLAGS.json:
        import vgpu  # noqa: PLC0415

        print(json.dumps(vgpu.ops(), indent=2))
        return 0
    sys.stdout.write(ops_doc.render(as_markdown=FLAGS.markdown))
    return 0


def _trace(argv: list[str]) -> int:
    """`vgpu trace replay|stats FILE`: the trace tool of the C++ library (a trace is untrusted
    input: every failure, even running out of memory, is a message and exit code 1)."""
    from vgpu import _core  # noqa: PLC0415 - no TensorFlow needed

    if len(argv) != 2 or argv[0] not in ("replay", "stats"):
        print("usage: vgpu trace replay|stats FILE [--executor NAME | --server ADDRESS] "
              "[--rtol X] [--atol Y] [--memory_limit BYTES] [--wait_timeout SECONDS]",
              file=sys.stderr)
        return 2
    args = [argv[0], argv[1], f"--executor={FLAGS.executor}"]
    # --memory_limit is the server's flag too (default 1GiB): passed only when given, so the
    # replay's own default (the recorded limit, capped by the host) applies otherwise.
    if FLAGS["memory_limit"].present:
        args.append(f"--memory_limit={FLAGS.memory_limit}")
    if FLAGS.wait_timeout is not None:
        args.append(f"--wait_timeout={FLAGS.wait_timeout!r}")
    if FLAGS.server:
        args.append(f"--server={FLAGS.server}")
        token = _server._read_token(FLAGS.token_file)  # noqa: SLF001
        if token:
            args.append(f"--token={token}")
    if argv[0] == "replay":
        args += [f"--rtol={FLAGS.rtol!r}", f"--atol={FLAGS.atol!r}"]
    try:
        code, out, err = _core.run_trace_tool(args)
    except (MemoryError, RuntimeError) as error:  # the C++ side catches; a last resort
        print(f"vgpu trace {argv[0]}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code


def _serve() -> int:
    return _server.main([])


def _bench_command() -> int:
    return _bench.main_from_flags()


_COMMANDS = {"info": _info, "server": _serve, "stats": _stats, "ops": _ops,
             "bench": _bench_command}


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "trace":
        return _trace(argv[2:])
    if len(argv) < 2 or argv[1] not in _COMMANDS:
        sys.stderr.write(usage_text())
        return 2
    return _COMMANDS[argv[1]]()


def run() -> None:
    """Console-script entry point. `vgpu --help` (no command before it) prints the command list
    and exits 0; absl's own help output (e.g. `vgpu stats --help`) starts with it too."""
    if len(sys.argv) >= 2 and sys.argv[1] in _HELP_ARGUMENTS:
        sys.stdout.write(usage_text())
        sys.exit(0)
    main_module = sys.modules.get("__main__")
    if main_module is not None and not main_module.__doc__:
        main_module.__doc__ = usage_text()  # what absl's usage() prints first
    app.run(main)


if __name__ == "__main__":
    run()
