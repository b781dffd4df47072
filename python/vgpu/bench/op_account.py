"""Where a training step's time goes, per TensorFlow op type, from a TensorFlow profiler trace.

TensorFlow's profiler (``tf.profiler.experimental.start/stop``) writes an XSpace
(``*.xplane.pb``). On the CPU, each op kernel TensorFlow's executor runs is one event on a
``tf_Compute`` line of the ``/host:CPU`` plane, named ``"<node name>:<op type>"``, spanning the
op's whole execution (the Eigen blocks it farms out to other threads included). Ops of one step
run concurrently on several ``tf_Compute`` threads, so their durations add up to more than the
step. This module divides each instant of the profiled window between the ops running at that
instant (an op running alone for 1 ms owns 1 ms; two running together for 1 ms own 0.5 ms
each): the shares of all op types plus the instants with no op running ("idle") add up to the
window exactly, which is what lets two runs' accounts be subtracted line by line.
"""
from __future__ import annotations

import dataclasses
import glob
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
class HostOpAccount:
    """The profiled window divided between op types. All times are picoseconds of wall time."""

    window_ps: int = 0
    idle_ps: int = 0  # instants inside the window with no op running
    shares_ps: dict[str, float] = dataclasses.field(default_factory=dict)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def per_step_ms(self, steps: int) -> dict[str, float]:
        """Each op type's share per step, milliseconds, largest first."""
        items = sorted(self.shares_ps.items(), key=lambda item: -item[1])
        return {name: share / steps / 1e9 for name, share in items}


def _op_intervals(plane) -> list[tuple[int, int, str]]:
    """(start_ps, end_ps, op type) of every op event on the plane's op-running lines."""
    names = {key: meta.name for key, meta in plane.event_metadata.items()}
    intervals = []
    for line in plane.lines:
        if not line.name.startswith(_OP_LINE_PREFIXES):
            continue
        base_ps = line.timestamp_ns * 1000
        for event in line.events:
            kind = op_type(names.get(event.metadata_id, ""))
            if kind is None or event.duration_ps <= 0:
                continue
            start = base_ps + event.offset_ps
            intervals.append((start, start + event.duration_ps, kind))
    return intervals


def account_host_ops(xspace, window: tuple[int, int] | None = None) -> HostOpAccount:
    """Divides the window (start_ps, end_ps) of the ``/host:CPU`` plane of `xspace` (an
    ``xplane_pb2.XSpace``) between the op types running in it; the window defaults to the span
    from the first op's start to the last op's end."""
    plane = next((p for p in xspace.planes if p.name == "/host:CPU"), None)
    intervals = _op_intervals(plane) if plane is not None else []
    if not intervals:
        return HostOpAccount()
    if window is None:
        window = (min(i[0] for i in intervals), max(i[1] for i in intervals))
    begin, end = window
    # Sweep: +1/-1 at each op's edges, clipped to the window; between two consecutive edges
    # the set of running ops is constant and shares the gap evenly.
    edges = []
    for start, stop, kind in intervals:
        start, stop = max(start, begin), min(stop, end)
        if start < stop:
            edges.append((start, 1, kind))
            edges.append((stop, -1, kind))
    edges.sort(key=lambda edge: (edge[0], edge[1]))
    account = HostOpAccount(window_ps=end - begin)
    running: dict[str, int] = {}
    active, previous = 0, begin
    for time_ps, delta, kind in edges:
        gap = time_ps - previous
        if gap > 0:
            if active == 0:
                account.idle_ps += gap
            else:
                for name, count in running.items():
                    account.shares_ps[name] = (account.shares_ps.get(name, 0.0) +
                                               gap * count / active)
        previous = time_ps
        running[kind] = running.get(kind, 0) + delta
        if running[kind] == 0:
            del running[kind]
        active += delta
        if delta > 0:
            account.counts[kind] = account.counts.get(kind, 0) + 1
    account.idle_ps += max(0, end - previous)
    return account


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
