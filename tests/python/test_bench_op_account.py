"""vgpu.bench.op_account: dividing a profiled window between TensorFlow op types, checked on
hand-built XSpaces whose answer is known."""
from __future__ import annotations

import pytest

from vgpu.bench import op_account

xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")


def _space(lines: dict[str, list[tuple[str, int, int]]]):
    """An XSpace with one /host:CPU plane: per line name, events (name, start_ps, end_ps)."""
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    ids: dict[str, int] = {}
    for line_name, events in lines.items():
        line = plane.lines.add(name=line_name, timestamp_ns=1000)  # 1 µs base, in ps below
        for name, start, end in events:
            if name not in ids:
                ids[name] = len(ids) + 1
                plane.event_metadata[ids[name]].name = name
            line.events.add(metadata_id=ids[name], offset_ps=start, duration_ps=end - start)
    return space


def test_op_types_are_read_from_node_names_and_runtime_events_are_not_ops():
    assert op_account.op_type("model/dense/MatMul:MatMul") == "MatMul"
    assert op_account.op_type("a:b/c:_FusedConv2D") == "_FusedConv2D"
    assert op_account.op_type("IteratorGetNext/_9:_Send") == "_Send"
    for runtime in ("ExecutorState::Process", "MemoryAllocation", ":MatMul", "x:not an op"):
        assert op_account.op_type(runtime) is None


def test_concurrent_ops_share_the_instants_they_overlap_and_the_shares_add_up_to_the_window():
    # Line A: MatMul 0-40, idle 40-60, Relu 60-100. Line B: Conv 20-80.
    space = _space({
        "tf_Compute/1": [("m:MatMul", 0, 40), ("r:Relu", 60, 100)],
        "tf_Compute/2": [("c:Conv2D", 20, 80), ("ExecutorState::Process", 0, 100)],
    })
    account = op_account.account_host_ops(space)
    assert account.window_ps == 100
    assert account.idle_ps == 0
    # MatMul alone 0-20, shared 20-40; Conv shared 20-40, alone 40-60, shared 60-80.
    assert account.shares_ps == pytest.approx({"MatMul": 30, "Conv2D": 40, "Relu": 30})
    assert account.counts == {"MatMul": 1, "Conv2D": 1, "Relu": 1}
    assert sum(account.shares_ps.values()) + account.idle_ps == account.window_ps


def test_instants_with_no_op_running_are_idle_and_a_window_clips_the_ops():
    space = _space({"tf_Compute/1": [("a:Add", 0, 10), ("b:Mul", 30, 50)],
                    "python": [("x:NotOnAnOpLine", 0, 50)]})
    whole = op_account.account_host_ops(space)
    assert (whole.window_ps, whole.idle_ps) == (50, 20)
    base = 1000 * 1000  # the line's timestamp, in ps
    clipped = op_account.account_host_ops(space, window=(base + 5, base + 40))
    assert clipped.window_ps == 35
    assert clipped.shares_ps == pytest.approx({"Add": 5, "Mul": 10})
    assert clipped.idle_ps == 20
    assert clipped.per_step_ms(steps=5) == pytest.approx({"Mul": 10 / 5 / 1e9, "Add": 1e-9})


def test_a_space_without_host_ops_gives_an_empty_account():
    account = op_account.account_host_ops(xplane_pb2.XSpace())
    assert (account.window_ps, account.idle_ps, account.shares_ps) == (0, 0, {})
