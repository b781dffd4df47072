"""vgpu.bench.op_account: dividing a profiled window between TensorFlow op types (TensorFlow's
host plane, the virtual GPU's device planes), checked on hand-built XSpaces whose answer is
known."""
from __future__ import annotations

import pytest

from vgpu.bench import op_account

xplane_pb2 = pytest.importorskip("tensorflow.tsl.profiler.protobuf.xplane_pb2")


BASE_PS = 1000 * 1000  # every line's timestamp (1 µs), in ps


def _space(lines: dict[str, list[tuple]], plane_name: str = "/host:CPU", space=None):
    """An XSpace with a plane `plane_name`: per line name, events (name, start_ps, end_ps),
    (name, start_ps, end_ps, tf_op) or (name, start_ps, end_ps, tf_op, queue_wait_ns) relative
    to the line's timestamp (tf_op "" for none)."""
    space = space if space is not None else xplane_pb2.XSpace()
    plane = space.planes.add(name=plane_name)
    plane.stat_metadata[1].name = "tf_op"
    plane.stat_metadata[2].name = "queue_wait_ns"
    ids: dict[str, int] = {}
    for line_name, events in lines.items():
        line = plane.lines.add(name=line_name, timestamp_ns=BASE_PS // 1000)
        for name, start, end, *stats in events:
            if name not in ids:
                ids[name] = len(ids) + 1
                plane.event_metadata[ids[name]].name = name
            event = line.events.add(metadata_id=ids[name], offset_ps=start,
                                    duration_ps=end - start)
            if stats and stats[0]:
                event.stats.add(metadata_id=1, str_value=stats[0])
            if len(stats) > 1:
                event.stats.add(metadata_id=2, uint64_value=stats[1])
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
    # The ops' own durations add up to 140 ps over 100 ps with an op running: 1.4 at once.
    assert account.op_time_ps == 140
    assert account.concurrency == pytest.approx(1.4)


def test_instants_with_no_op_running_are_idle_and_a_window_clips_the_ops():
    space = _space({"tf_Compute/1": [("a:Add", 0, 10), ("b:Mul", 30, 50)],
                    "python": [("x:NotOnAnOpLine", 0, 50)]})
    whole = op_account.account_host_ops(space)
    assert (whole.window_ps, whole.idle_ps) == (50, 20)
    clipped = op_account.account_host_ops(space, window=(BASE_PS + 5, BASE_PS + 40))
    assert clipped.window_ps == 35
    assert clipped.shares_ps == pytest.approx({"Add": 5, "Mul": 10})
    assert clipped.idle_ps == 20
    assert clipped.per_step_ms(steps=5) == pytest.approx({"Mul": 10 / 5 / 1e9, "Add": 1e-9})


def test_concurrency_counts_only_the_part_of_each_op_inside_the_window():
    # MatMul 0-50 and Conv 10-30 side by side, Relu 70-90 alone; the window 20-80 keeps MatMul
    # 20-50, Conv 20-30 and Relu 70-80: 50 ps of ops over 40 ps with one running.
    space = _space({"tf_Compute/1": [("m:MatMul", 0, 50), ("r:Relu", 70, 90)],
                    "tf_Compute/2": [("c:Conv2D", 10, 30)]})
    account = op_account.account_host_ops(space, (BASE_PS + 20, BASE_PS + 80))
    assert (account.window_ps, account.idle_ps, account.op_time_ps) == (60, 20, 50)
    assert account.concurrency == pytest.approx(50 / 40)
    # Ops one after another: 1.0; nothing at all: 0.0.
    serial = op_account.account_host_ops(_space({"tf_Compute/1": [("m:MatMul", 0, 10),
                                                                  ("r:Relu", 10, 30)]}))
    assert serial.concurrency == pytest.approx(1.0)
    assert op_account.Account().concurrency == 0.0


def test_a_space_without_host_ops_gives_an_empty_account():
    account = op_account.account_host_ops(xplane_pb2.XSpace())
    assert (account.window_ps, account.idle_ps, account.shares_ps) == (0, 0, {})


def test_the_device_account_divides_the_executors_work_by_issuing_op_and_splits_its_idle_time():
    # Executor: stream 1 runs a MatMul kernel 10-30 and a copy (no op) 50-60; stream 2 a Relu
    # kernel 20-40. Client: the MatMul op kernel computes 0-12, the Relu's 40-55.
    space = _space({
        "Stream #1": [("matmul", 10, 30, "d/MatMul:MatMul"), ("MemcpyH2D", 50, 60)],
        "Stream #2": [("relu", 20, 40, "d/Relu:Relu")],
        "Op kernels (host)": [("MatMul", 0, 12), ("Relu", 40, 55)],
        # The client waiting for the device is not the executor's work.
        "Round trips (host)": [("synchronize_device", 30, 60)],
    }, plane_name="/device:GPU:0")
    account = op_account.account_device(space)
    assert account.executor.window_ps == 60
    # MatMul alone 10-20, shared 20-30; Relu shared 20-30, alone 30-40; the copy 50-60.
    assert account.executor.shares_ps == pytest.approx(
        {"MatMul": 15, "Relu": 15, op_account.UNATTRIBUTED: 10})
    assert account.client_ps == {"MatMul": 12, "Relu": 15}
    # Idle: 0-10 (client busy 0-10) and 40-50 (client busy 40-50): all while the client works.
    assert account.executor.idle_ps == 20
    assert (account.idle_while_client_ps, account.idle_otherwise_ps) == (20, 0)


def test_device_idle_with_no_op_kernel_running_is_the_runtimes_and_host_planes_are_ignored():
    space = _space({"Stream #1": [("k", 0, 10, "a:Add"), ("k", 40, 50, "a:Add")],
                    "Op kernels (host)": [("Add", 10, 20)]}, plane_name="/device:GPU:0")
    _space({"tf_Compute/1": [("x:Mul", 0, 500)]}, space=space)  # TensorFlow's host plane
    account = op_account.account_device(space)
    assert account.executor.shares_ps == pytest.approx({"Add": 20})
    assert (account.idle_while_client_ps, account.idle_otherwise_ps) == (10, 20)
    assert op_account.account_host_ops(space).shares_ps == pytest.approx({"Mul": 500})


def test_idle_time_goes_to_the_client_then_event_waits_then_queued_commands_then_the_rest():
    ns = 1000  # ps: queue_wait_ns is in nanoseconds
    # Executor (stream 1): a MatMul 0-10 ns and a Relu 100-110 ns whose command was queued
    # 40 ns before it started (60-100). Stream 2 was blocked on stream 1's event 30-70 ns. The
    # client computed an op kernel 20-40 ns. Idle 10-100: the client's 20-40, then the wait's
    # 40-70, then the queued Relu's 70-100; 10-20 is the rest.
    space = _space({
        "Stream #1": [("matmul", 0, 10 * ns, "d/MatMul:MatMul"),
                      ("relu", 100 * ns, 110 * ns, "d/Relu:Relu", 40)],
        "Event waits": [("wait for stream 1", 30 * ns, 70 * ns)],
        "Op kernels (host)": [("Relu", 20 * ns, 40 * ns)],
    }, plane_name="/device:GPU:0")
    found = op_account.device_intervals(space)
    assert found.queued == [(BASE_PS + 60 * ns, BASE_PS + 100 * ns, "Relu")]
    assert found.event_waits == [(BASE_PS + 30 * ns, BASE_PS + 70 * ns, "wait for stream 1")]
    account = op_account.account_device(space)
    # The wait is not the executor's work: only the kernels are shared out.
    assert account.executor.shares_ps == pytest.approx({"MatMul": 10 * ns, "Relu": 10 * ns})
    assert account.executor.idle_ps == 90 * ns
    assert account.idle_while_client_ps == 20 * ns
    assert account.idle_event_wait_ps == 30 * ns
    assert account.idle_queued_ps == 30 * ns
    assert account.idle_otherwise_ps == 10 * ns
    assert account.causes_known
    # The queued time left to the causes after the client's and the wait's: the Relu's 70-100.
    assert account.queued_by_op_ps == pytest.approx({"Relu": 30 * ns})


def test_idle_time_with_several_commands_queued_goes_to_the_one_queued_first():
    ns = 1000
    # Idle 10-100 ns. A MatMul queued 20-110 (started at 110) and a Relu queued 40-100 (started
    # at 100, on another stream): 20-100 is the MatMul's, queued first; the Relu waited behind.
    space = _space({
        "Stream #1": [("add", 0, 10 * ns, "d/Add:Add"),
                      ("relu", 100 * ns, 110 * ns, "d/Relu:Relu", 60)],
        "Stream #2": [("matmul", 110 * ns, 120 * ns, "d/MatMul:MatMul", 90)],
    }, plane_name="/device:GPU:0")
    account = op_account.account_device(space)
    assert account.idle_queued_ps == 80 * ns  # 20-100
    assert account.queued_by_op_ps == pytest.approx({"MatMul": 80 * ns})
    assert account.idle_otherwise_ps == 10 * ns  # 10-20


def test_each_instant_goes_to_the_interval_that_started_first():
    # a 0-10, b 5-30, c 8-12 (inside b): 0-10 a, 10-30 b (queued before c).
    assert op_account._first_queued([(5, 30, "b"), (0, 10, "a"), (8, 12, "c")]) == {
        "a": 10, "b": 20}
    assert op_account._first_queued([(0, 5, "x"), (10, 15, "x")]) == {"x": 10}  # a gap
    assert op_account._first_queued([]) == {}


def test_intervals_are_clipped_to_spans_keeping_their_labels():
    spans = [(0, 10), (20, 30), (40, 50)]
    assert op_account._clip_to([(5, 45, "a"), (31, 39, "b"), (-5, 2, "c")], spans) == [
        (5, 10, "a"), (20, 30, "a"), (40, 45, "a"), (0, 2, "c")]


def test_interval_subtraction_keeps_what_lies_outside():
    a = [(0, 10), (20, 30), (40, 50)]
    assert op_account._subtract(a, [(5, 25), (45, 60)]) == [(0, 5), (25, 30), (40, 45)]
    assert op_account._subtract(a, []) == a
    assert op_account._subtract(a, [(-5, 100)]) == []


def test_a_space_without_device_planes_gives_an_empty_device_account():
    account = op_account.account_device(xplane_pb2.XSpace())
    assert account.executor.window_ps == 0 and account.client_ps == {}


def _profiled(op_lines: dict[str, list[tuple]], plane_name: str, steps: list[tuple[int, int]]):
    """A space with op lines on `plane_name` and, on the host plane, the worker's step events."""
    space = _space(op_lines, plane_name)
    if plane_name != "/host:CPU":
        space = _space({}, "/host:CPU", space)
    host = next(p for p in space.planes if p.name == "/host:CPU")
    host.event_metadata[99].name = op_account.STEP_EVENT
    line = host.lines.add(name="python", timestamp_ns=BASE_PS // 1000)
    for start, end in steps:
        line.events.add(metadata_id=99, offset_ps=start, duration_ps=end - start)
    return space


def test_the_comparison_adds_up_to_each_sides_step_and_says_how_much_of_the_gap_it_explains():
    # Two steps each side. TF-CPU: MatMul 0-30 and 50-80 of a 0-100 window (idle 40).
    cpu = _profiled({"tf_Compute/1": [("m:MatMul", 0, 30), ("m:MatMul", 50, 80)]}, "/host:CPU",
                    [(0, 50), (50, 100)])
    # vgpu: executor MatMul 10-50 and 110-150 of 0-200; the client's op kernels 0-10, 100-110.
    vgpu = _profiled({"Stream #1": [("matmul", 10, 50, "m:MatMul"),
                                    ("matmul", 110, 150, "m:MatMul")],
                      "Op kernels (host)": [("MatMul", 0, 10, "m:MatMul"),
                                            ("MatMul", 100, 110, "m:MatMul")]},
                     "/device:GPU:0", [(0, 100), (100, 200)])
    # The workers' own clocks: 100 ps and 200 ps over the two steps (in seconds).
    comparison = op_account.compare(cpu, 100e-12, vgpu, 200e-12)
    ms = 1e-9  # one picosecond in milliseconds
    assert comparison.rows == [("MatMul", pytest.approx(30 * ms), pytest.approx(40 * ms),
                                pytest.approx(10 * ms))]
    assert comparison.cpu_idle_ms == pytest.approx(20 * ms)
    assert comparison.idle_while_client_ms == pytest.approx(10 * ms)
    assert comparison.idle_otherwise_ms == pytest.approx(50 * ms)
    assert comparison.cpu_window_ms == pytest.approx(50 * ms)
    assert comparison.vgpu_window_ms == pytest.approx(100 * ms)
    # Each side's rows add up to its step; the table explains the measured gap exactly here.
    assert (comparison.idle_event_wait_ms, comparison.idle_queued_ms) == (0, 0)
    executor_side = (sum(r[2] for r in comparison.rows) + comparison.idle_while_client_ms +
                     comparison.idle_event_wait_ms + comparison.idle_queued_ms +
                     comparison.idle_otherwise_ms)
    assert executor_side == pytest.approx(comparison.vgpu_window_ms)
    assert comparison.unaccounted == pytest.approx(0.0)
    # Each side ran one op at a time: 60 ps of TF-CPU's ops and 80 ps of the executor's.
    assert comparison.cpu_op_time_ms == pytest.approx(30 * ms)
    assert comparison.vgpu_op_time_ms == pytest.approx(40 * ms)
    assert (comparison.cpu_concurrency, comparison.vgpu_concurrency) == (1.0, 1.0)
    table = op_account.markdown("toy", comparison)
    assert "| MatMul |" in table and "to within 0.0%" in table
    assert "1.00 running at once" in table
    # No queue_wait_ns in this profile (as through a server): the idle causes are one row.
    assert not comparison.causes_known
    assert "does not tell them apart" in table and "nothing queued" not in table
    comparison.causes_known = True  # as in process
    comparison.queued_by_op_ms = {"MatMul": 0.25, "Relu": 0.5, "Add": 0.125, "Mul": 0.0625}
    table = op_account.markdown("toy", comparison)
    assert "by op type (ms per step): Relu 0.500, MatMul 0.250, Add 0.125." in table
    for row in ("blocked on another's event", "a command queued, not started", "nothing queued"):
        assert row in table
    assert "does not tell them apart" not in table


def test_a_profile_without_the_workers_step_events_is_an_error():
    with pytest.raises(ValueError, match=op_account.STEP_EVENT):
        op_account.step_window(_space({"tf_Compute/1": [("m:MatMul", 0, 30)]}))
