"""Where a training step's time goes, per TensorFlow op type, from a TensorFlow profiler trace:
TensorFlow-CPU's own kernels from its host plane, the virtual GPU's from the plugin's device
planes (plugin/profiler/device_planes.h).

TensorFlow's profiler (``tf.profiler.experimental.start/stop``) writes an XSpace
(``*.xplane.pb``). On the CPU, each op kernel TensorFlow's executor runs is one event on a
``tf_Compute`` line of the ``/host:CPU`` plane, named ``"<node name>:<op type>"``, spanning the
op's whole execution (the Eigen blocks it farms out to other threads included). Ops of one step
run concurrently on several ``tf_Compute`` threads, so their durations add up to more than the
step. This module divides each instant of the profiled window between the ops running at that
instant (an op running alone for 1 ms owns 1 ms; two running together for 1 ms own 0.5 ms
each): the shares of all op types plus the instants with no op running ("idle") add up to the
window exactly, which is what lets two runs' accounts be subtracted line by line.

On the virtual GPU, the same division applies to the executor's work (its kernels, copies and
memsets, each tagged with the TensorFlow op that issued it). Each instant the executor runs
nothing goes to the first of these that holds then:

* the client is computing an op kernel (the client is the bottleneck);
* a stream is blocked on another stream's event (the "Event waits" line: a compute stream
  waiting for an input copy, a copy stream for the compute stream's earlier work);
* a command is queued and has not started: the stream's worker has yet to wake (an executor
  event's "queue_wait_ns" stat says how long its command was queued before it started);
* none of these: TensorFlow's runtime and Python between ops and steps, its event polling.
"""
from __future__ import annotations

import bisect
import dataclasses
import glob
import heapq
import os
import re

# An op type is a TensorFlow identifier (letters, digits, '_').
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OP_LINE_PREFIXES = ("tf_Compute", "tf_inter_op")


def op_type(event_name: str) -> str | None:
    """The op type of a TensorFlow op event name ("scope/node:OpType"), or None for any other
    event (runtime bookkeeping, "a::b" names, names without a node part)."""
    node, colon, kind = event_name.rpartition(":")
    if not colon or not node or "::" in event_name or not _IDENTIFIER.fullmatch(kind):
        return None
    return kind


@dataclasses.dataclass
class Account:
    """A window divided between op types. All times are picoseconds of wall time."""

    window_ps: int = 0
    idle_ps: int = 0  # instants inside the window with nothing running
    shares_ps: dict[str, float] = dataclasses.field(default_factory=dict)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    # The intervals' own durations inside the window, added up: more than the busy time
    # (window - idle) when ops ran at the same time.
    op_time_ps: int = 0

    @property
    def concurrency(self) -> float:
        """How many ops ran at once on average while any ran: op_time over the busy time (1.0
        when they ran one at a time; 0.0 for an empty account)."""
        busy = self.window_ps - self.idle_ps
        return self.op_time_ps / busy if busy > 0 else 0.0

    def per_step_ms(self, steps: int) -> dict[str, float]:
        """Each op type's share per step, milliseconds, largest first."""
        items = sorted(self.shares_ps.items(), key=lambda item: -item[1])
        return {name: share / steps / 1e9 for name, share in items}


Interval = tuple[int, int, str]  # (start_ps, end_ps, op type)


def share_window(intervals: list[Interval], window: tuple[int, int] | None = None) -> Account:
    """Divides `window` (start_ps, end_ps; default: from the first start to the last end)
    between the labels of `intervals`: each instant goes in equal parts to the intervals
    covering it, or to idle when none does."""
    if not intervals:
        return Account()
    if window is None:
        window = (min(i[0] for i in intervals), max(i[1] for i in intervals))
    begin, end = window
    op_time_ps = 0
    # Sweep: +1/-1 at each interval's edges, clipped to the window; between two consecutive
    # edges the set of running intervals is constant and shares the gap evenly.
    edges = []
    for start, stop, label in intervals:
        start, stop = max(start, begin), min(stop, end)
        if start < stop:
            edges.append((start, 1, label))
            edges.append((stop, -1, label))
            op_time_ps += stop - start
    edges.sort(key=lambda edge: (edge[0], edge[1]))
    account = Account(window_ps=end - begin, op_time_ps=op_time_ps)
    running: dict[str, int] = {}
    active, previous = 0, begin
    for time_ps, delta, label in edges:
        gap = time_ps - previous
        if gap > 0:
            if active == 0:
                account.idle_ps += gap
            else:
                for name, count in running.items():
                    account.shares_ps[name] = (account.shares_ps.get(name, 0.0) +
                                               gap * count / active)
        previous = time_ps
        running[label] = running.get(label, 0) + delta
        if running[label] == 0:
            del running[label]
        active += delta
        if delta > 0:
            account.counts[label] = account.counts.get(label, 0) + 1
    account.idle_ps += max(0, end - previous)
    return account


def _line_events(plane, line):
    """(start_ps, end_ps, event name, {stat name: value}) of each event of `line`."""
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    base_ps = line.timestamp_ns * 1000
    for event in line.events:
        stats = {stat_names.get(stat.metadata_id, ""): getattr(stat, stat.WhichOneof("value"))
                 for stat in event.stats if stat.WhichOneof("value")}
        start = base_ps + event.offset_ps
        yield start, start + event.duration_ps, names.get(event.metadata_id, ""), stats


def host_op_intervals(xspace) -> list[Interval]:
    """The op kernels TensorFlow ran on the host, from the ``/host:CPU`` plane's op lines."""
    intervals = []
    for plane in xspace.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if not line.name.startswith(_OP_LINE_PREFIXES):
                continue
            for start, end, name, _ in _line_events(plane, line):
                kind = op_type(name)
                if kind is not None and end > start:
                    intervals.append((start, end, kind))
    return intervals


def account_host_ops(xspace, window: tuple[int, int] | None = None) -> Account:
    """The window of the ``/host:CPU`` plane of `xspace` (an ``xplane_pb2.XSpace``) divided
    between the op types TensorFlow ran on the host (TensorFlow-CPU's own kernels)."""
    return share_window(host_op_intervals(xspace), window)


# The virtual GPU's planes (the plugin's profiler, plugin/profiler/device_planes.h).
DEVICE_PLANE_PREFIX = "/device:GPU:"
OP_KERNELS_LINE = "Op kernels (host)"
# Lines measured on the host end so ("Op kernels (host)", "Round trips (host)"): the client's
# time, never the executor's. A round trip's wait is the client's, not work the device ran.
HOST_LINE_SUFFIX = "(host)"
# The times an executor stream was blocked on another stream's event: not the executor's work.
EVENT_WAITS_LINE = "Event waits"
UNATTRIBUTED = "(no op)"


@dataclasses.dataclass
class DeviceIntervals:
    """The virtual GPU's planes as intervals (picoseconds)."""

    executor: list[Interval]  # kernels, copies, memsets, labelled with the issuing op's type
    client: list[Interval]  # op kernels computed on the host, labelled with their op type
    event_waits: list[Interval]  # a stream blocked on another stream's event
    queued: list[Interval]  # a command queued on its stream, not yet started (its op type)
    # Whether the executor's events say when their commands were queued (in process; a server
    # reports start and end only, and no event waits): else the idle causes are not told apart.
    causes_known: bool = False


def device_intervals(xspace) -> DeviceIntervals:
    """The intervals of the virtual GPU's planes: each executor event (kernel, copy, memset)
    labelled with the op type of its "tf_op" stat, and, from its "queue_wait_ns" stat, the time
    its command was queued before it started; each op kernel's Compute on the host (the
    client's cost) labelled with its op type; the event waits. The host's other lines (the
    round trips the client waited for) are none of these."""
    found = DeviceIntervals([], [], [], [])
    for plane in xspace.planes:
        if not plane.name.startswith(DEVICE_PLANE_PREFIX):
            continue
        for line in plane.lines:
            on_host = line.name == OP_KERNELS_LINE
            if not on_host and line.name.endswith(HOST_LINE_SUFFIX):
                continue
            for start, end, name, stats in _line_events(plane, line):
                if on_host:
                    found.client.append((start, end, name))
                elif line.name == EVENT_WAITS_LINE:
                    found.event_waits.append((start, end, name))
                else:
                    kind = stats.get("tf_op", "").rpartition(":")[2] or UNATTRIBUTED
                    found.executor.append((start, end, kind))
                    found.causes_known = found.causes_known or "queue_wait_ns" in stats
                    queued_ps = 1000 * int(stats.get("queue_wait_ns", 0))
                    if queued_ps > 0:
                        found.queued.append((start - queued_ps, start, kind))
    return found


@dataclasses.dataclass
class DeviceAccount:
    """The virtual GPU's side of a profiled window, picoseconds of wall time."""

    executor: Account  # the window divided between the op types whose work the executor ran
    client_ps: dict[str, int]  # per op type, the host time its op kernels took (not shared)
    # The executor's idle time, each instant counted once, in this order of precedence:
    idle_while_client_ps: int  # an op kernel ran on the host
    idle_event_wait_ps: int  # else a stream was blocked on another stream's event
    idle_queued_ps: int  # else a command was queued and had not started (its worker waking)
    idle_otherwise_ps: int  # else: TensorFlow's runtime and Python, its event polling
    causes_known: bool = True  # False: the profile cannot tell the last three apart (a server)
    # idle_queued_ps by op type: each instant to the command queued first (_first_queued).
    queued_by_op_ps: dict[str, int] = dataclasses.field(default_factory=dict)


def _union(intervals: list[Interval]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end, _ in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of sorted, disjoint intervals `a` outside sorted, disjoint intervals `b`."""
    result, j = [], 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k, cursor = j, start
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                result.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            result.append((cursor, end))
    return result


def _clip_to(intervals: list[Interval], spans: list[tuple[int, int]]) -> list[Interval]:
    """The parts of labelled `intervals` (which may overlap each other) inside sorted, disjoint
    `spans`, each part keeping its label."""
    starts = [a for a, _ in spans]
    parts = []
    for start, stop, label in intervals:
        i = max(0, bisect.bisect_right(starts, start) - 1)
        while i < len(spans) and spans[i][0] < stop:
            a, b = max(start, spans[i][0]), min(stop, spans[i][1])
            if a < b:
                parts.append((a, b, label))
            i += 1
    return parts


def _first_queued(intervals: list[Interval]) -> dict[str, int]:
    """The time covered by labelled `intervals`, each instant given to the label of the interval
    that started first among those covering it."""
    edges = sorted({t for start, stop, _ in intervals for t in (start, stop)})
    ordered = sorted(intervals)
    covered: dict[str, int] = {}
    heap: list[Interval] = []
    next_interval = 0
    for begin, end in zip(edges, edges[1:]):
        while next_interval < len(ordered) and ordered[next_interval][0] <= begin:
            heapq.heappush(heap, ordered[next_interval])
            next_interval += 1
        while heap and heap[0][1] <= begin:  # ended: no longer queued
            heapq.heappop(heap)
        if heap:
            label = heap[0][2]
            covered[label] = covered.get(label, 0) + (end - begin)
    return covered


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """The total length of the intersection of two sorted, disjoint interval lists."""
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def account_device(xspace, window: tuple[int, int] | None = None) -> DeviceAccount:
    """The virtual GPU's account of the window (default: from the first to the last event of
    its planes): the executor's time per op type, the client's time per op type, and the
    executor's idle time split by cause (see the module's docstring)."""
    found = device_intervals(xspace)
    executor, client = found.executor, found.client
    everything = executor + client
    if window is None and everything:
        window = (min(i[0] for i in everything), max(i[1] for i in everything))
    shares = share_window(executor, window)
    client_ps: dict[str, int] = {}
    for start, end, kind in client:
        client_ps[kind] = client_ps.get(kind, 0) + (end - start)
    if window is None:
        return DeviceAccount(shares, client_ps, 0, 0, 0, 0)
    begin, end = window

    def clip(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(max(a, begin), min(b, end)) for a, b in spans if min(b, end) > max(a, begin)]

    busy = clip(_union(executor))
    idle, cursor = [], begin
    for start, stop in busy:
        if start > cursor:
            idle.append((cursor, start))
        cursor = max(cursor, stop)
    if cursor < end:
        idle.append((cursor, end))
    # Each idle instant goes to the first category that holds then.
    def take(idle, category):  # (the idle time `category` covers, the idle time left)
        covered = clip(_union(category))
        return _overlap(idle, covered), _subtract(idle, covered)

    while_client, idle = take(idle, client)
    event_wait, idle = take(idle, found.event_waits)
    # The rest of the idle time with a command queued, by op type: each instant goes to the
    # command queued first (the one a waking worker runs first; the others wait behind it).
    queued_by_op = _first_queued(_clip_to(found.queued, idle))
    queued = sum(queued_by_op.values())
    return DeviceAccount(shares, client_ps, while_client, event_wait, queued,
                         shares.idle_ps - while_client - event_wait - queued,
                         found.causes_known, queued_by_op)


# The trace event the benchmark worker wraps each profiled step in (vgpu/bench/worker.py).
STEP_EVENT = "vgpu_bench_step"


def step_window(xspace) -> tuple[tuple[int, int], int]:
    """((start_ps, end_ps), steps) spanned by the worker's step events on the host plane."""
    spans = []
    for plane in xspace.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for start, end, name, _ in _line_events(plane, line):
                if name == STEP_EVENT:
                    spans.append((start, end))
    if not spans:
        raise ValueError(f"no {STEP_EVENT} events in the profile")
    return (min(s for s, _ in spans), max(e for _, e in spans)), len(spans)


@dataclasses.dataclass
class Comparison:
    """One model's per-op account, TensorFlow-CPU beside the virtual GPU, ms per step."""

    rows: list[tuple[str, float, float, float]]  # op type, TF-CPU, executor, client
    cpu_idle_ms: float
    idle_while_client_ms: float
    idle_event_wait_ms: float
    idle_queued_ms: float
    idle_otherwise_ms: float
    causes_known: bool
    queued_by_op_ms: dict[str, float]  # idle_queued_ms by the op type of the waiting commands
    cpu_window_ms: float  # the account's step: window / steps
    vgpu_window_ms: float
    cpu_measured_ms: float  # the worker's own clock over the profiled steps, per step
    vgpu_measured_ms: float
    # The ops' (the executor's commands') own durations added up, per step, and how many ran at
    # once on average while any ran (Account.concurrency): TensorFlow-CPU runs independent ops
    # side by side on its inter-op threads; a stream's commands run one after another.
    cpu_op_time_ms: float = 0.0
    vgpu_op_time_ms: float = 0.0
    cpu_concurrency: float = 0.0
    vgpu_concurrency: float = 0.0

    @property
    def unaccounted(self) -> float:
        """How far the table's gap (window per step) is from the measured gap, as a fraction
        of the measured gap (0: the table explains the gap exactly)."""
        measured = self.vgpu_measured_ms - self.cpu_measured_ms
        table = self.vgpu_window_ms - self.cpu_window_ms
        return abs(table - measured) / abs(measured) if measured else 0.0


def compare(cpu_xspace, cpu_span_s: float, vgpu_xspace, vgpu_span_s: float) -> Comparison:
    """The per-op account of one model: `cpu_xspace` profiled under TensorFlow-CPU and
    `vgpu_xspace` on the virtual GPU, each over the worker's profiled steps (`*_span_s`: their
    span on the worker's own clock)."""
    cpu_window, cpu_steps = step_window(cpu_xspace)
    vgpu_window, vgpu_steps = step_window(vgpu_xspace)
    cpu = account_host_ops(cpu_xspace, cpu_window)
    device = account_device(vgpu_xspace, vgpu_window)
    cpu_ms = cpu.per_step_ms(cpu_steps)
    executor_ms = device.executor.per_step_ms(vgpu_steps)
    client_ms = {kind: ps / vgpu_steps / 1e9 for kind, ps in device.client_ps.items()}
    kinds = sorted(set(cpu_ms) | set(executor_ms) | set(client_ms),
                   key=lambda k: -max(cpu_ms.get(k, 0), executor_ms.get(k, 0) +
                                      client_ms.get(k, 0)))
    rows = [(k, cpu_ms.get(k, 0.0), executor_ms.get(k, 0.0), client_ms.get(k, 0.0))
            for k in kinds]
    return Comparison(
        rows=rows,
        cpu_idle_ms=cpu.idle_ps / cpu_steps / 1e9,
        idle_while_client_ms=device.idle_while_client_ps / vgpu_steps / 1e9,
        idle_event_wait_ms=device.idle_event_wait_ps / vgpu_steps / 1e9,
        idle_queued_ms=device.idle_queued_ps / vgpu_steps / 1e9,
        idle_otherwise_ms=device.idle_otherwise_ps / vgpu_steps / 1e9,
        causes_known=device.causes_known,
        queued_by_op_ms={kind: ps / vgpu_steps / 1e9
                         for kind, ps in device.queued_by_op_ps.items()},
        cpu_window_ms=(cpu_window[1] - cpu_window[0]) / cpu_steps / 1e9,
        vgpu_window_ms=(vgpu_window[1] - vgpu_window[0]) / vgpu_steps / 1e9,
        cpu_measured_ms=1e3 * cpu_span_s / cpu_steps,
        vgpu_measured_ms=1e3 * vgpu_span_s / vgpu_steps,
        cpu_op_time_ms=cpu.op_time_ps / cpu_steps / 1e9,
        vgpu_op_time_ms=device.executor.op_time_ps / vgpu_steps / 1e9,
        cpu_concurrency=cpu.concurrency,
        vgpu_concurrency=device.executor.concurrency)


def markdown(model: str, comparison: Comparison, top: int = 15) -> str:
    """A Markdown table of `comparison`: the `top` op types by time, the rest summed."""
    c = comparison
    lines = [f"**{model}** (ms per step)", "",
             "| op type | TF-CPU | vgpu executor | vgpu client (op kernel on host) | "
             "executor − TF-CPU |", "|---|---:|---:|---:|---:|"]
    shown, rest = c.rows[:top], c.rows[top:]
    for kind, cpu, executor, client in shown:
        lines.append(f"| {kind} | {cpu:.3f} | {executor:.3f} | {client:.3f} | "
                     f"{executor - cpu:+.3f} |")
    if rest:
        cpu, executor, client = (sum(r[i] for r in rest) for i in (1, 2, 3))
        lines.append(f"| ({len(rest)} other op types) | {cpu:.3f} | {executor:.3f} | "
                     f"{client:.3f} | {executor - cpu:+.3f} |")
    lines.append(f"| idle: no op running (TF-CPU) / executor idle while the client computes "
                 f"an op | {c.cpu_idle_ms:.3f} | {c.idle_while_client_ms:.3f} | | "
                 f"{c.idle_while_client_ms - c.cpu_idle_ms:+.3f} |")
    causes = (
        ("executor idle, a stream blocked on another's event (input copies, their order)",
         c.idle_event_wait_ms),
        ("executor idle, a command queued, not started (its stream's worker waking)",
         c.idle_queued_ms),
        ("executor idle, nothing queued (TensorFlow's runtime and Python, event polling)",
         c.idle_otherwise_ms))
    if not c.causes_known:  # a server's profile: waits, hand-offs and the runtime together
        causes = (("executor idle, no op on the client (waits, hand-offs, runtime: a server's "
                   "profile does not tell them apart)",
                   c.idle_event_wait_ms + c.idle_queued_ms + c.idle_otherwise_ms),)
    for label, ms in causes:
        lines.append(f"| {label} | | {ms:.3f} | | {ms:+.3f} |")
    lines.append(f"| **step, as the table adds up** | {c.cpu_window_ms:.3f} | "
                 f"{c.vgpu_window_ms:.3f} | | {c.vgpu_window_ms - c.cpu_window_ms:+.3f} |")
    lines.append(f"| **step, measured by the worker** | {c.cpu_measured_ms:.3f} | "
                 f"{c.vgpu_measured_ms:.3f} | | "
                 f"{c.vgpu_measured_ms - c.cpu_measured_ms:+.3f} |")
    lines.append("")
    waiting = sorted(c.queued_by_op_ms.items(), key=lambda item: -item[1])[:3]
    if c.causes_known and waiting:
        lines.append("Commands queued while the executor idled, by op type (ms per step): " +
                     ", ".join(f"{kind} {ms:.3f}" for kind, ms in waiting) + ".")
        lines.append("")
    lines.append(f"Ops side by side: TF-CPU's op kernels took {c.cpu_op_time_ms:.3f} ms a step "
                 f"added up, {c.cpu_concurrency:.2f} running at once on average while any "
                 f"ran; the executor's commands {c.vgpu_op_time_ms:.3f} ms, "
                 f"{c.vgpu_concurrency:.2f} at once. The table's rows share out the instants "
                 f"ops overlap, so a side that runs ops at the same time books less per op "
                 f"than they took.")
    lines.append("")
    lines.append(f"The table accounts for the measured gap to within "
                 f"{100 * c.unaccounted:.1f}%. The client column is not shared out: it overlaps "
                 f"the executor's work (the executor runs a launch while the client describes "
                 f"the next).")
    return "\n".join(lines)


def load_xspace(logdir: str):
    """The newest ``*.xplane.pb`` below `logdir`, parsed (an ``xplane_pb2.XSpace``)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: PLC0415 - TensorFlow's

    paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True),
                   key=os.path.getmtime)
    if not paths:
        raise FileNotFoundError(f"no *.xplane.pb below {logdir}")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    return space
