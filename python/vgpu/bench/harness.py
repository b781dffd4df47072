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


@contextlib.contextmanager
def vgpu_server(kind: str, memory_limit: str = "4GiB"):
    """Runs `python -m vgpu.server` on a temporary Unix socket or 127.0.0.1 (any port); yields
    its address and stops it (SIGTERM) afterwards."""
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
                      batch_size: int, timeout: float = 1800) -> dict:
    """Trains `model` under `config` in a child process; returns the worker's result with a
    `summary` (median step time, steps per second, mean counters per measured step)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update(dict(config.env))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if config.server is not None:
        with vgpu_server(config.server) as address:
            env["VGPU_BACKEND"] = address
            return _run_worker(config, env, model, steps, warmup, batch_size, timeout)
    return _run_worker(config, env, model, steps, warmup, batch_size, timeout)


def _run_worker(config: Configuration, env: dict, model: str, steps: int, warmup: int,
                batch_size: int, timeout: float) -> dict:
    command = [sys.executable, "-m", "vgpu.bench.worker", f"--model={model}",
               f"--device={config.device}", f"--steps={steps}", f"--warmup={warmup}",
               f"--batch_size={batch_size}"]
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
               "examples_per_s": batch_size / median}
    counters = result.get("per_step_counters") or []
    measured = counters[warmup:]
    if measured:
        for key in measured[0]:
            summary[f"{key}_per_step"] = statistics.fmean(c[key] for c in measured)
        summary["warmup_descriptor_calls_forwarded"] = sum(
            c["descriptor_calls_forwarded"] for c in counters[:warmup])
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
             " executor primitives created / reused per step |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s = r["summary"]
        ratio = times.get((r["model"], baseline), float("nan")) / s["median_step_s"]
        inproc = _inproc_name(r["configuration"])
        vs_inproc = (f"{times[(r['model'], inproc)] / s['median_step_s']:.2f}x"
                     if (r["model"], inproc) in times else "–")
        get = lambda k, scale=1.0: f"{s[k] / scale:.1f}" if k in s else "–"  # noqa: E731
        lines.append(
            f"| {r['model']} | {r['configuration']} | {1000 * s['median_step_s']:.1f} | "
            f"{ratio:.2f}x | {vs_inproc} | {get('descriptor_calls_forwarded_per_step')} | "
            f"{get('descriptor_calls_local_per_step')} | {get('launches_per_step')} | "
            f"{get('round_trips_per_step')} | {get('bytes_sent_per_step', 1024)} | "
            f"{get('bytes_received_per_step', 1024)} | "
            f"{get('executor_primitives_created_per_step')} / "
            f"{get('executor_primitives_reused_per_step')} |")
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
