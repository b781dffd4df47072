"""Runs benchmark configurations side by side (each in a child process) and summarises them."""
from __future__ import annotations

import dataclasses
import json
import os
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time


@dataclasses.dataclass(frozen=True)
class Configuration:
    """One way to run a model: a name, the device, and the VGPU_* environment."""

    name: str
    device: str  # "gpu" (the virtual GPU) or "cpu" (TensorFlow's own CPU kernels)
    env: tuple[tuple[str, str], ...] = ()
    server: str | None = None  # "unix" or "tcp": a `vgpu server` started for the run


TF_CPU = Configuration("tensorflow-cpu", "cpu")
INPROC_REUSE = Configuration("vgpu inproc reuse", "gpu", (("VGPU_DESCRIPTOR_MODE", "reuse"),))
INPROC_FORWARD = Configuration("vgpu inproc forward", "gpu",
                               (("VGPU_DESCRIPTOR_MODE", "forward"),))

REMOTE_UNIX_REUSE = Configuration("vgpu unix reuse", "gpu", (("VGPU_DESCRIPTOR_MODE", "reuse"),),
                                  "unix")
REMOTE_UNIX_FORWARD = Configuration("vgpu unix forward", "gpu",
                                    (("VGPU_DESCRIPTOR_MODE", "forward"),), "unix")
REMOTE_TCP_REUSE = Configuration("vgpu tcp reuse", "gpu", (("VGPU_DESCRIPTOR_MODE", "reuse"),),
                                 "tcp")
REMOTE_TCP_FORWARD = Configuration("vgpu tcp forward", "gpu",
                                   (("VGPU_DESCRIPTOR_MODE", "forward"),), "tcp")


def peak_rss_bytes(pid: int) -> int:
    """The peak resident memory (VmHWM) of a running process, bytes; 0 if unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def vgpu_server(kind: str, memory_limit: str = "4GiB", peak_rss: dict | None = None):
    """Runs `python -m vgpu.server` on a temporary Unix socket or 127.0.0.1 (any port); yields
    its address and stops it (SIGTERM) afterwards. `peak_rss` (if given) receives the server
    process's peak resident memory as peak_rss["server"] just before it is stopped (`vgpu
    server` replaces itself with vgpu-server, so the process is the server)."""
    with tempfile.TemporaryDirectory(prefix="vgpu-bench-") as folder:
        listen = f"unix://{folder}/vgpu.sock" if kind == "unix" else "tcp://127.0.0.1:0"
        ready = os.path.join(folder, "ready")
        process = subprocess.Popen([sys.executable, "-m", "vgpu.server", f"--listen={listen}",
                                    f"--memory_limit={memory_limit}", f"--ready_file={ready}"],
                                   stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(ready):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the vgpu server did not start")
                time.sleep(0.05)
            with open(ready, encoding="utf-8") as f:
                yield f.read()
        finally:
            if peak_rss is not None:
                peak_rss["server"] = peak_rss_bytes(process.pid)
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def ping_pong(kind: str, iterations: int = 20000) -> dict:
    """Round-trip latency of the transport (kMemoryInfo calls to a fresh server)."""
    from vgpu import _core  # noqa: PLC0415

    with vgpu_server(kind) as address:
        times = sorted(_core.ping_pong(address, iterations))
    return {"transport": kind, "iterations": iterations,
            "median_us": 1e6 * times[len(times) // 2],
            "p99_us": 1e6 * times[int(len(times) * 0.99)],
            "mean_us": 1e6 * statistics.fmean(times)}


def run_configuration(config: Configuration, model: str, steps: int, warmup: int,
                      batch_size: int, timeout: float = 1800, profile_dir: str = "",
                      policy: str = "float32", dataset: bool = False) -> dict:
    """Trains `model` under `config` in a child process, its layers under Keras' dtype `policy`
    (float32, mixed_float16 or mixed_bfloat16), from a dataset of unknown batch size with
    `dataset` (the worker's --dataset); returns the worker's result with a `summary` (median
    step time, steps per second, mean counters per measured step)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update(dict(config.env))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if config.server is not None:
        peak = {}
        with vgpu_server(config.server, peak_rss=peak) as address:
            env["VGPU_BACKEND"] = address
            result = _run_worker(config, env, model, steps, warmup, batch_size, timeout,
                                 profile_dir, policy, dataset)
        # Memory of the whole configuration: the TensorFlow process and its server.
        result["server_peak_rss_bytes"] = peak.get("server", 0)
        result["summary"]["peak_rss_bytes"] = (result.get("peak_rss_bytes", 0) +
                                               result["server_peak_rss_bytes"])
        return result
    return _run_worker(config, env, model, steps, warmup, batch_size, timeout, profile_dir,
                       policy, dataset)


def _run_worker(config: Configuration, env: dict, model: str, steps: int, warmup: int,
                batch_size: int, timeout: float, profile_dir: str = "",
                policy: str = "float32", dataset: bool = False) -> dict:
    command = [sys.executable, "-m", "vgpu.bench.worker", f"--model={model}",
               f"--device={config.device}", f"--steps={steps}", f"--warmup={warmup}",
               f"--batch_size={batch_size}", f"--profile_dir={profile_dir}",
               f"--policy={policy}", f"--{'' if dataset else 'no'}dataset"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    line = next((l for l in done.stdout.splitlines() if l.startswith("VGPU_BENCH_RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"{config.name} / {model} failed ({done.returncode}):\n"
                           f"{done.stderr[-4000:]}")
    result = json.loads(line.split(" ", 1)[1])
    result["configuration"] = config.name
    median = statistics.median(result["step_times"])
    summary = {"median_step_s": median, "steps_per_s": 1.0 / median,
               "examples_per_s": batch_size / median,
               "peak_rss_bytes": result.get("peak_rss_bytes", 0)}
    if result.get("context_switches") and result["steps"]:
        for kind, total in result["context_switches"].items():
            summary[f"{kind}_context_switches_per_step"] = total / result["steps"]
    # The worker reads the counters per warm-up step, and over the measured steps as one total
    # (reading them per step would put vgpu.stats() and its garbage in the timed steps).
    measured = result.get("measured_counters") or {}
    if measured and result["steps"]:
        for key, total in measured.items():
            summary[f"{key}_per_step"] = total / result["steps"]
        summary["warmup_descriptor_calls_forwarded"] = sum(
            c["descriptor_calls_forwarded"] for c in result.get("per_step_counters") or [])
    result["summary"] = summary
    return result


def _inproc_name(configuration: str) -> str | None:
    """The in-process configuration with the same descriptor mode ("vgpu unix reuse" ->
    "vgpu inproc reuse"); None for configurations that are not vgpu ones."""
    parts = configuration.split()
    if len(parts) != 3 or parts[0] != "vgpu":
        return None
    return f"vgpu inproc {parts[2]}"


def markdown_table(rows: list[dict], baseline: str) -> str:
    """A Markdown table of summaries, with step-time ratios against `baseline` and against the
    in-process configuration of the same descriptor mode."""
    times = {(r["model"], r["configuration"]): r["summary"]["median_step_s"] for r in rows}
    lines = ["| model | configuration | median step (ms) | throughput vs " + baseline +
             " | vs in-process | descriptor calls forwarded / step | local / step |"
             " launches / step | round trips / step | KiB sent / step | KiB received / step |"
             " command KiB / step | templates created / launches by template per step |"
             " executor primitives created / reused per step | context switches / step,"
             " voluntary / involuntary | peak RSS (MiB) | RSS vs " + baseline + " |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             "---:|"]
    rss = {(r["model"], r["configuration"]): r["summary"].get("peak_rss_bytes", 0) for r in rows}
    def rss_ratio(r):
        base = rss.get((r["model"], baseline), 0)
        mine = r["summary"].get("peak_rss_bytes", 0)
        return f"{mine / base:.2f}x" if base and mine else "–"

    for r in rows:
        s = r["summary"]
        ratio = times.get((r["model"], baseline), float("nan")) / s["median_step_s"]
        inproc = _inproc_name(r["configuration"])
        vs_inproc = (f"{times[(r['model'], inproc)] / s['median_step_s']:.2f}x"
                     if (r["model"], inproc) in times else "–")
        get = lambda k, scale=1.0: f"{s[k] / scale:.1f}" if k in s else "–"  # noqa: E731
        # What crossed a socket, less host-to-device data (nothing does in process).
        remote = "inproc" not in r["configuration"] and "command_bytes_sent_per_step" in s
        wire = lambda k, scale=1.0: get(k, scale) if remote else "–"  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['configuration']} | {1000 * s['median_step_s']:.1f} | "
            f"{ratio:.2f}x | {vs_inproc} | {get('descriptor_calls_forwarded_per_step')} | "
            f"{get('descriptor_calls_local_per_step')} | {get('launches_per_step')} | "
            f"{get('round_trips_per_step')} | {get('bytes_sent_per_step', 1024)} | "
            f"{get('bytes_received_per_step', 1024)} | "
            f"{wire('command_bytes_sent_per_step', 1024)} | "
            f"{wire('templates_created_per_step')} / {wire('launches_by_template_per_step')} | "
            f"{get('executor_primitives_created_per_step')} / "
            f"{get('executor_primitives_reused_per_step')} | "
            f"{get('voluntary_context_switches_per_step')} / "
            f"{get('involuntary_context_switches_per_step')} | "
            f"{s.get('peak_rss_bytes', 0) / (1 << 20):.0f} | {rss_ratio(r)} |")
    return "\n".join(lines)


# The bandwidth rows: (transport name, server kind or None, extra VGPU_* environment). "unix"
# is the default Unix-socket client (bulk copies through the shared-memory region), "unix-socket"
# the same server with VGPU_SHM=0 (every byte through the socket).
BANDWIDTH_TRANSPORTS = {
    "inproc": (None, ()),
    "unix": ("unix", ()),
    "unix-socket": ("unix", (("VGPU_SHM", "0"),)),
    "tcp": ("tcp", ()),
}


def transport_table(ping_pongs: list[dict], bandwidths: list[dict]) -> str:
    """A Markdown table of the transport microbenchmarks: round-trip latency and bandwidth (GB/s
    each way, and a host-to-device-to-host round trip with its ratios against in-process and
    against the Unix socket without shared memory)."""
    latency = {p["transport"]: p for p in ping_pongs}
    copies = {b["transport"]: b for b in bandwidths}
    inproc = copies.get("inproc", {}).get("round_trip_s")
    socket_only = copies.get("unix-socket", {}).get("round_trip_s")
    lines = ["| transport | round trip median (µs) | round trip p99 (µs) | "
             "host to device (GB/s) | device to host (GB/s) | copy round trip (GB/s) | "
             "time vs inproc | speed vs unix-socket |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in [k for k in BANDWIDTH_TRANSPORTS if k in latency or k in copies]:
        p, b = latency.get(kind, {}), copies.get(kind, {})
        cell = lambda d, k, f: f.format(d[k]) if k in d else "–"  # noqa: E731
        trip = b.get("round_trip_s")
        vs_inproc = f"{trip / inproc:.2f}x" if trip and inproc else "–"
        vs_socket = f"{socket_only / trip:.2f}x" if trip and socket_only else "–"
        lines.append(f"| {kind} | {cell(p, 'median_us', '{:.1f}')} | {cell(p, 'p99_us', '{:.1f}')}"
                     f" | {cell(b, 'htod_GBps', '{:.2f}')} | {cell(b, 'dtoh_GBps', '{:.2f}')} |"
                     f" {cell(b, 'round_trip_GBps', '{:.2f}')} | {vs_inproc} | {vs_socket} |")
    return "\n".join(lines)


def bandwidth(kind: str, megabytes: float = 64, repeats: int = 5, timeout: float = 600) -> dict:
    """Host-to-device and device-to-host bandwidth (medians of `repeats` copies of a `megabytes`
    MiB tensor) through `kind`, a key of BANDWIDTH_TRANSPORTS: in process, or a fresh `vgpu
    server` over a Unix socket (with or without shared memory) or TCP; measured in a child
    process (vgpu.bench.transfer). Rates in MB/s and GB/s (10^6, 10^9 bytes per second); the
    round trip is one copy each way, `round_trip_GBps` counting the bytes of both."""
    server, extra_env = BANDWIDTH_TRANSPORTS[kind]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(dict(extra_env))
    command = [sys.executable, "-m", "vgpu.bench.transfer", f"--megabytes={megabytes}",
               f"--repeats={repeats}"]

    def measure() -> dict:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
        line = next((l for l in done.stdout.splitlines()
                     if l.startswith("VGPU_BENCH_RESULT ")), None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"bandwidth {kind} failed ({done.returncode}):\n"
                               f"{done.stderr[-4000:]}")
        return json.loads(line.split(" ", 1)[1])

    if server is None:
        result = measure()
    else:
        with vgpu_server(server) as address:
            env["VGPU_BACKEND"] = address
            result = measure()
    nbytes = result["bytes"]
    htod = statistics.median(result["htod_s"])
    dtoh = statistics.median(result["dtoh_s"])
    trip = statistics.median(a + b for a, b in zip(result["htod_s"], result["dtoh_s"]))
    return {"transport": kind, "bytes": nbytes, "repeats": repeats,
            "htod_MBps": nbytes / 1e6 / htod, "dtoh_MBps": nbytes / 1e6 / dtoh,
            "htod_GBps": nbytes / 1e9 / htod, "dtoh_GBps": nbytes / 1e9 / dtoh,
            "round_trip_s": trip, "round_trip_GBps": 2 * nbytes / 1e9 / trip,
            "htod_s": result["htod_s"], "dtoh_s": result["dtoh_s"]}


# The launch-cost rows: (name, device, server kind or None).
LAUNCH_COST_CONFIGURATIONS = (
    ("tensorflow-cpu", "cpu", None),
    ("vgpu inproc", "gpu", None),
    ("vgpu unix", "gpu", "unix"),
)


def launch_cost(name: str, ops: int = 420, short_ops: int = 20, repeats: int = 100,
                timeout: float = 600) -> dict:
    """µs per tiny kernel launch under configuration `name` (LAUNCH_COST_CONFIGURATIONS): the
    slope between chains of `short_ops` and `ops` ops, and the rest of a call; measured in a
    child process (vgpu.bench.launch_cost)."""
    _, device, server = next(c for c in LAUNCH_COST_CONFIGURATIONS if c[0] == name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    command = [sys.executable, "-m", "vgpu.bench.launch_cost", f"--device={device}",
               f"--ops={ops}", f"--short_ops={short_ops}", f"--repeats={repeats}"]

    def run(run_env):
        done = subprocess.run(command, env=run_env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        line = next((l for l in done.stdout.splitlines() if l.startswith("VGPU_BENCH_RESULT ")),
                    None)
        if done.returncode != 0 or line is None:
            raise RuntimeError(f"launch cost {name} failed ({done.returncode}):\n"
                               f"{done.stderr[-4000:]}")
        return json.loads(line.split(" ", 1)[1])

    if server is None:
        result = run(env)
    else:
        with vgpu_server(server) as address:
            result = run(dict(env, VGPU_BACKEND=address))
    result["configuration"] = name
    return result


def launch_cost_table(results: list[dict], hooks_off_ns: float | None = None) -> str:
    """A Markdown table of µs per tiny launch (the slope between a short and a long chain) and
    per call besides its ops, with the ratios to TensorFlow's own CPU op and call; with
    `hooks_off_ns`, a line on what the profiling hooks cost per op while no profile is taken."""
    base = next((r for r in results if r["configuration"] == "tensorflow-cpu"), None)
    lines = ["| configuration | µs per tiny op (launch) | vs tensorflow-cpu | "
             "µs per call besides its ops | vs tensorflow-cpu | launches per call |",
             "|---|---:|---:|---:|---:|---:|"]

    def ratio(value: float, reference: float | None) -> str:
        return f"{value / reference:.1f}x" if reference and reference > 0 else "–"

    for r in results:
        launches = f"{r['launches_per_call']:.0f}" if r["launches_per_call"] is not None else "–"
        lines.append(
            f"| {r['configuration']} | {r['us_per_op']:.2f} | "
            f"{ratio(r['us_per_op'], base and base['us_per_op'])} | {r['call_us']:.0f} | "
            f"{ratio(r['call_us'], base and base['call_us'])} | {launches} |")
    if results:
        r = results[0]
        lines.append(f"\nPer op: the slope between tf.functions of {r['short_ops']} and "
                     f"{r['ops']} chained `sin` ops on one element, Grappler's arithmetic "
                     f"optimizer off (on the CPU it would compose the chain into one op).")
    if hooks_off_ns is not None:
        inproc = next((r["us_per_op"] for r in results
                       if r["configuration"] == "vgpu inproc"), None)
        share = f" ({100 * hooks_off_ns / (1000 * inproc):.2f}% of the in-process tiny op)" \
            if inproc else ""
        lines.append(f"\nProfiling hooks with no profile taken: {hooks_off_ns:.1f} ns per op "
                     f"kernel and command{share}.")
    return "\n".join(lines)


def activity_hooks_off_ns() -> float:
    """What the profiling hooks cost per op while no profile is taken (vgpu._core), ns."""
    from vgpu import _core  # noqa: PLC0415

    return min(_core.activity_hooks_off_ns() for _ in range(3))
