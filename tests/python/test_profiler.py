"""The plugin's pluggable profiler (plugin/profiler/): a TensorFlow profiling session around
Keras training steps on the virtual GPU writes, beside TensorFlow's host plane, a
/device:GPU:0 plane with one event per kernel the executor ran (as many as vgpu.stats() counted
launches), named by kernel, each carrying the TensorFlow op that issued it, inside the profiled
window (TensorFlow's host plane); the op kernels' host-side spans on their own line, with the
descriptor calls and round trips each made, and the calls the client waited for on another. With
the executor in process and in a `vgpu server` (whose kernel times come back over the socket).
Runs in a child process (a fresh TensorFlow)."""
import json

import pytest

PROFILE_TWO_STEPS = r"""
import glob, json, os, sys, tempfile, time
import keras, numpy as np, tensorflow as tf
import vgpu
from tensorflow.tsl.profiler.protobuf import xplane_pb2

keras.utils.set_random_seed(1)
model = keras.Sequential([
    keras.Input(shape=(12, 12, 1)),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(10),
])
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = np.random.default_rng(0).uniform(size=(64, 12, 12, 1)).astype("float32")
y = (np.arange(64) % 10).astype("int32")
model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # warm-up: tracing, descriptors
logdir = os.environ.get("PROFILE_LOGDIR") or tempfile.mkdtemp()
before = vgpu.stats()["launches"]
started = time.time_ns()
tf.profiler.experimental.start(logdir)
model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # two steps
[w.numpy() for w in model.weights]  # every update has run
tf.profiler.experimental.stop()
stopped = time.time_ns()
launches = vgpu.stats()["launches"] - before
path = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0]
space = xplane_pb2.XSpace()
space.ParseFromString(open(path, "rb").read())
planes = {}
for plane in space.planes:
    names = {k: m.name for k, m in plane.event_metadata.items()}
    stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
    lines = {}
    for line in plane.lines:
        events = []
        for event in line.events:
            stats = {stat_names[s.metadata_id]: getattr(s, s.WhichOneof("value"))
                     for s in event.stats}
            start = line.timestamp_ns * 1000 + event.offset_ps
            events.append({"name": names[event.metadata_id], "start_ps": start,
                           "end_ps": start + event.duration_ps, "stats": stats})
        lines[line.name] = events
    planes[plane.name] = lines
print("PROFILE " + json.dumps({"launches": launches, "path": path, "started_ps": started * 1000,
                               "backend": os.environ.get("VGPU_BACKEND", ""),
                               "stopped_ps": stopped * 1000, "planes": planes,
                               "warnings": list(space.warnings)}))
"""

COPY_OR_MEMSET = {"MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "Memset"}


@pytest.fixture(scope="module", params=["inproc", "unix"])
def profile(request, tmp_path_factory):
    """The profile of two steps with the executor in process, or in a `vgpu server` reached over
    a Unix socket (the server sends its kernel times back, wire_format.h ProfileRecords)."""
    from conftest import run_python_code  # noqa: PLC0415
    from raw_tenant import ServerProcess, backend_env  # noqa: PLC0415

    logdir = str(tmp_path_factory.mktemp("logs"))
    if request.param == "inproc":
        result = run_python_code(PROFILE_TWO_STEPS, timeout=300,
                                 env=backend_env("inproc", PROFILE_LOGDIR=logdir))
    else:
        with ServerProcess(tmp_path_factory.mktemp("server")) as server:
            result = run_python_code(PROFILE_TWO_STEPS, timeout=300,
                                     env=backend_env(server.address, PROFILE_LOGDIR=logdir))
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("PROFILE "))
    return json.loads(line.split(" ", 1)[1])


def _stream_events(profile):
    lines = profile["planes"]["/device:GPU:0"]
    return [event for name, events in lines.items() if name.startswith("Stream #")
            for event in events]


def test_a_profiling_session_writes_a_device_plane_beside_tensorflows_host_plane(profile):
    assert "/host:CPU" in profile["planes"]
    lines = profile["planes"]["/device:GPU:0"]
    assert any(name.startswith("Stream #") for name in lines)
    assert lines.get("Op kernels (host)"), "the op kernels' host-side line is missing"
    assert profile["warnings"] == []


def test_every_launch_the_client_counted_is_one_kernel_event(profile):
    kernels = [e for e in _stream_events(profile) if e["name"] not in COPY_OR_MEMSET]
    assert profile["launches"] > 0
    assert len(kernels) == profile["launches"]


def test_kernel_events_name_the_tensorflow_op_that_issued_them(profile):
    kernels = [e for e in _stream_events(profile) if e["name"] not in COPY_OR_MEMSET]
    op_types = {e["stats"]["tf_op"].rpartition(":")[2] for e in kernels}
    assert all("tf_op" in e["stats"] for e in kernels)
    assert op_types & {"Conv2D", "_FusedConv2D"}, op_types
    assert op_types & {"MatMul", "_FusedMatMul"}, op_types
    assert "Conv2DBackpropFilter" in op_types, op_types
    host_ops = {e["name"] for e in profile["planes"]["/device:GPU:0"]["Op kernels (host)"]}
    assert op_types <= host_ops | {""}


def test_events_lie_inside_the_profiled_window_and_copies_carry_their_bytes(profile):
    # TensorFlow rebases every plane's times on the session's start: the device planes' events
    # must lie inside the span of the host plane's, and none may outlast the session.
    host = [e for events in profile["planes"]["/host:CPU"].values() for e in events]
    begin, end = min(e["start_ps"] for e in host), max(e["end_ps"] for e in host)
    session_ps = profile["stopped_ps"] - profile["started_ps"]
    events = _stream_events(profile) + profile["planes"]["/device:GPU:0"]["Op kernels (host)"]
    for event in events:
        assert begin <= event["start_ps"] <= event["end_ps"] <= end, event
        assert event["end_ps"] - event["start_ps"] < session_ps
    copies = [e for e in _stream_events(profile) if e["name"].startswith("Memcpy")]
    assert copies and all(e["stats"].get("bytes", 0) > 0 for e in copies)


def test_op_events_count_their_descriptor_calls_and_round_trips(profile):
    ops = profile["planes"]["/device:GPU:0"]["Op kernels (host)"]
    for event in ops:
        for stat in ("descriptor_calls_local", "descriptor_calls_forwarded", "round_trips"):
            assert stat in event["stats"], event
    # After warm-up the method answers descriptor calls locally: none is forwarded.
    assert sum(e["stats"]["descriptor_calls_local"] for e in ops) > 0
    assert sum(e["stats"]["descriptor_calls_forwarded"] for e in ops) == 0


def test_round_trips_are_on_their_own_line_named_by_command(profile):
    lines = profile["planes"]["/device:GPU:0"]
    calls = lines.get("Round trips (host)", [])
    ops = lines["Op kernels (host)"]
    assert calls, "a training step waits for the executor at least once"
    assert len(calls) >= sum(e["stats"]["round_trips"] for e in ops)
    assert all(e["end_ps"] >= e["start_ps"] for e in calls)
    assert {e["name"] for e in calls} <= {
        "allocate", "free", "memory_info", "synchronize_stream", "synchronize_device",
        "stream_status", "memcpy_sync", "create_stream", "destroy_stream"}, calls


def test_in_process_executor_events_say_how_long_their_command_was_queued(profile):
    events = _stream_events(profile)
    waits = [e["stats"].get("queue_wait_ns") for e in events]
    if profile["backend"].startswith("unix"):
        # A server reports each command's start and end only.
        assert waits == [None] * len(events)
        assert "Event waits" not in profile["planes"]["/device:GPU:0"]
        return
    assert None not in waits, "an in-process executor event lacks queue_wait_ns"
    assert sum(waits) > 0
    # Streams blocked on another's event (if any were): no op's device time, the waiting stream.
    for event in profile["planes"]["/device:GPU:0"].get("Event waits", []):
        assert event["name"].startswith("wait for stream ") and "tf_op" not in event["stats"]
        assert event["stats"]["stream"] > 0


def test_kernel_events_carry_their_parameter_block_size(profile):
    kernels = [e for e in _stream_events(profile) if e["name"] not in COPY_OR_MEMSET]
    assert any(e["stats"].get("params_bytes", 0) > 0 for e in kernels)


# What TensorBoard's Profile tab (xprof, tensorboard-plugin-profile) makes of the profile: the
# trace viewer's events and the op profile, converted by xprof's own converter in a child process.
XPROF_CONVERT = r"""
import json, sys
from xprof.convert import raw_to_tool_data
path = sys.argv[1]
trace, _ = raw_to_tool_data.xspace_to_tool_data([path], "trace_viewer", {})
op_profile, _ = raw_to_tool_data.xspace_to_tool_data([path], "op_profile", {})
print("TOOLS " + json.dumps({"trace": json.loads(trace), "op_profile": json.loads(op_profile)}))
"""


@pytest.fixture(scope="module")
def xprof_tools(profile):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    result = subprocess.run([sys.executable, "-c", XPROF_CONVERT, profile["path"]],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("TOOLS "))
    return json.loads(line.split(" ", 1)[1])


def test_xprofs_trace_viewer_shows_the_device_its_streams_and_every_kernel(profile, xprof_tools):
    events = xprof_tools["trace"]["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    gpu = next(pid for pid, name in processes.items() if name == "/device:GPU:0")
    threads = {e["tid"]: e["args"]["name"] for e in events
               if e.get("name") == "thread_name" and e["pid"] == gpu}
    assert "Op kernels (host)" in threads.values() and "Round trips (host)" in threads.values()
    streams = {tid for tid, name in threads.items() if name.startswith("Stream #")}
    kernels = [e for e in events if e.get("ph") == "X" and e["pid"] == gpu
               and e["tid"] in streams and e["name"] not in COPY_OR_MEMSET]
    assert len(kernels) == profile["launches"]
    assert all(e["dur"] >= 0 for e in kernels)


def test_xprofs_op_profile_accounts_the_device_time_to_tensorflow_ops(xprof_tools):
    def names(node):
        yield node["name"]
        for child in node.get("children", []):
            yield from names(child)

    ops = set(names(xprof_tools["op_profile"]["byProgram"]))
    assert {"Conv2DBackpropFilter", "MatMul"} <= ops or {"Conv2DBackpropFilter",
                                                       "_FusedMatMul"} <= ops, ops
