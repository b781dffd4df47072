"""Command traces (docs/traces.md): a small Keras fit recorded with VGPU_TRACE in a child process
replays on the in-process cpu executor and through a `vgpu server` with equal results; a
corrupted or truncated trace is refused with the offset named and a non-zero exit; `vgpu trace
stats` lists every recorded kernel with its launch count and every recorded step; a result
that differs is reported as the first mismatch; a run recorded through a server replays
in-process; an unknown executor is refused listing the known ones; two devices record into one
file with their ordinals; the vgpu-server executable replays and profiles a trace by itself, in
an environment without Python (and, built with VGPU_BUILD_STANDALONE_SERVER=ON, without
TensorFlow)."""
import struct
import subprocess
import sys
import zlib

import pytest

from raw_tenant import ServerProcess

from vgpu import server as vgpu_server

_FIT = """
import numpy as np
import keras
import vgpu
import vgpu.keras

keras.utils.set_random_seed(3)
rng = np.random.default_rng(0)
x = rng.normal(size=(48, 8, 8, 1)).astype("float32")
y = rng.integers(0, 4, size=48).astype("int32")
model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.Flatten(),
    keras.layers.Dense(4),
])
model.compile(optimizer="sgd",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False,
                    callbacks=[vgpu.keras.VgpuStepCallback(show_stats=False)])
print("loss", history.history["loss"][-1])
print("launches", vgpu.stats()["launches"])
"""

_TWO_DEVICES = """
import tensorflow as tf
import vgpu

with tf.device("/GPU:0"):
    a = tf.nn.relu(tf.constant([[-1.0, 2.0], [3.0, -4.0]]))
with tf.device("/GPU:1"):
    b = tf.matmul(a, a)
print(a.numpy().tolist(), b.numpy().tolist())
"""


def _vgpu(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "vgpu", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _records(path, with_offsets=False):
    """The trace's records as (type, ordinal, body) (with_offsets: (type, ordinal, body,
    offset)), parsed from the format of plugin/trace/trace_format.h independently of the C++
    reader."""
    data = path.read_bytes()
    assert data[:8] == b"VGPUTRAC"
    version, wire_version, device_count = struct.unpack_from("<HHI", data, 8)
    # Trace format 2; the header names the wire version of the recording build (6: launch
    # templates, which change batches, not the command bodies a trace holds).
    assert (version, wire_version) == (2, 7)
    offset = 40
    for _ in range(2):  # producer, backends
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4 + length
    records = []
    while offset < len(data):
        kind, _, ordinal, length = struct.unpack_from("<BBHI", data, offset)
        body = data[offset + 24:offset + 24 + length]
        # The checksum covers the record header's first 16 bytes, then the body (version 2).
        assert struct.unpack_from("<I", data, offset + 16)[0] == zlib.crc32(
            body, zlib.crc32(data[offset:offset + 16]))
        records.append((kind, ordinal, body, offset) if with_offsets else (kind, ordinal, body))
        offset += 24 + length
    assert offset == len(data)
    return device_count, records


def _launches_by_kernel(records):
    counts = {}
    for kind, _, body in records:
        if kind != 1:  # post
            continue
        command_kind = struct.unpack_from("<H", body, 4)[0]
        if command_kind == 16:  # kLaunch
            kernel = struct.unpack_from("<Q", body, 4 + 16)[0]
            counts[kernel] = counts.get(kernel, 0) + 1
    return counts


@pytest.fixture(scope="module")
def fit_trace(tmp_path_factory):
    from conftest import run_python_code  # noqa: PLC0415

    path = tmp_path_factory.mktemp("trace") / "fit.vgtrace"
    result = run_python_code(_FIT, env={"VGPU_TRACE": str(path), "VGPU_MEMORY_LIMIT": "256MiB"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.exists()
    return path


def test_fit_trace_is_small_and_holds_posts_calls_results_and_steps(fit_trace):
    assert fit_trace.stat().st_size < 4 << 20
    device_count, records = _records(fit_trace)
    assert device_count == 1
    kinds = {kind for kind, _, _ in records}
    assert kinds == {1, 2, 3, 4, 5}  # post, call, result, step, notified
    assert sum(1 for kind, _, _ in records if kind == 4) >= 3  # three batches, each marked


def test_replay_in_process_on_cpu_matches(fit_trace):
    result = _vgpu("trace", "replay", str(fit_trace), "--executor", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: replayed "), result.stdout
    assert "results compared" in result.stdout


def test_replay_through_a_unix_server_matches(fit_trace, tmp_path):
    with ServerProcess(tmp_path, memory_limit="512MiB") as server:
        result = _vgpu("trace", "replay", str(fit_trace), f"--server={server.address}")
        assert server.alive(), server.output()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: replayed "), result.stdout
    assert "unix://" in result.stdout


def test_corrupted_trace_is_refused_naming_the_offset(fit_trace, tmp_path):
    data = bytearray(fit_trace.read_bytes())
    # A byte inside the body of the record that holds the file's middle (bodies are what the
    # CRC covers; a byte at len/2 itself may fall in a record header's time or reserved field).
    _, records = _records(fit_trace, with_offsets=True)
    middle = [r for r in records if r[3] + 24 + len(r[2]) > len(data) // 2 and r[2]]
    _, _, body, offset = middle[0] if middle else [r for r in records if r[2]][-1]
    data[offset + 24 + len(body) // 2] ^= 0x5A
    corrupt = tmp_path / "corrupt.vgtrace"
    corrupt.write_bytes(bytes(data))
    result = _vgpu("trace", "replay", str(corrupt))
    assert result.returncode != 0
    assert "corrupt at byte offset" in result.stderr, result.stderr
    assert "record " in result.stderr, result.stderr
    # The record header's time is covered by the checksum too (format version 2).
    data = bytearray(fit_trace.read_bytes())
    data[offset + 8] ^= 0x01
    corrupt.write_bytes(bytes(data))
    result = _vgpu("trace", "replay", str(corrupt))
    assert result.returncode != 0
    assert "checksum mismatch" in result.stderr, result.stderr


def test_truncated_trace_is_refused_naming_the_offset(fit_trace, tmp_path):
    data = fit_trace.read_bytes()
    truncated = tmp_path / "truncated.vgtrace"
    truncated.write_bytes(data[:-7])
    result = _vgpu("trace", "replay", str(truncated))
    assert result.returncode != 0
    assert "truncated" in result.stderr and "byte offset" in result.stderr, result.stderr
    not_a_trace = tmp_path / "garbage.vgtrace"
    not_a_trace.write_bytes(b"hello")
    result = _vgpu("trace", "stats", str(not_a_trace))
    assert result.returncode != 0
    assert "not a vgpu trace" in result.stderr, result.stderr


def test_stats_lists_every_kernel_with_its_launch_count_and_every_step(fit_trace):
    result = _vgpu("trace", "stats", str(fit_trace))
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    kernels_part = text.split("kernels:\n")[1].split("\nsteps:\n")[0]
    listed = {}
    for line in kernels_part.splitlines()[1:]:
        fields = line.split()
        if fields and fields[0].isdigit():
            listed[int(fields[0])] = int(fields[-4])
    _, records = _records(fit_trace)
    assert listed == _launches_by_kernel(records)
    assert " ? " not in kernels_part  # every kernel id has its name
    steps_part = text.split("\nsteps:\n")[1]
    step_rows = [line.split() for line in steps_part.splitlines()[1:]
                 if line.split() and line.split()[0].isdigit()]
    assert len(step_rows) >= 3
    assert "launch" in text.split("kernels:")[0]  # commands by kind
    assert "bytes host->device" in text


def _standalone_trace(*args):
    """`vgpu-server trace ...` with nothing of this environment: no Python, no virtual environment."""
    return subprocess.run([vgpu_server.binary_path(), "trace", *args], capture_output=True,
                          text=True, timeout=300, check=False, env={"PATH": "/usr/bin:/bin"})


def test_the_server_binary_replays_a_trace_without_python(fit_trace):
    result = _standalone_trace("replay", str(fit_trace), "--executor", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: replayed "), result.stdout
    in_python = _vgpu("trace", "replay", str(fit_trace), "--executor", "cpu")
    # The same replay: the same count of commands and compared results.
    assert result.stdout.split("(")[0] == in_python.stdout.split("(")[0]


def test_the_server_binary_profiles_a_trace_and_refuses_a_corrupted_one(fit_trace, tmp_path):
    stats = _standalone_trace("stats", str(fit_trace))
    assert stats.returncode == 0, stats.stdout + stats.stderr
    assert "kernels:" in stats.stdout and "steps:" in stats.stdout
    assert " ? " not in stats.stdout.split("kernels:\n")[1].split("\nsteps:\n")[0]
    truncated = tmp_path / "truncated.vgtrace"
    truncated.write_bytes(fit_trace.read_bytes()[:1000])
    refused = _standalone_trace("replay", str(truncated))
    assert refused.returncode != 0
    assert "offset" in refused.stderr, refused.stderr
    usage = _standalone_trace()
    assert usage.returncode == 2 and "usage: vgpu trace" in usage.stderr


def test_a_result_that_differs_is_reported_as_the_first_mismatch(fit_trace, tmp_path):
    _, records = _records(fit_trace, with_offsets=True)
    data = bytearray(fit_trace.read_bytes())
    for kind, _, body, offset in records:
        if kind != 3:  # result
            continue
        target, form, size = struct.unpack_from("<QBQ", body, 0)
        if form != 0 or size < 4:
            continue
        value = struct.unpack_from("<f", body, 17)[0]
        changed = bytearray(body)
        struct.pack_into("<f", changed, 17, value + 1000.0)
        data[offset + 24:offset + 24 + len(body)] = changed
        struct.pack_into("<I", data, offset + 16,
                         zlib.crc32(bytes(changed), zlib.crc32(bytes(data[offset:offset + 16]))))
        break
    else:
        pytest.fail("no device-to-host result in the trace")
    tampered = tmp_path / "tampered.vgtrace"
    tampered.write_bytes(bytes(data))
    result = _vgpu("trace", "replay", str(tampered))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"MISMATCH at record {target} (memcpy_dtoh" in result.stdout, result.stdout
    assert "element 0" in result.stdout and "stream " in result.stdout, result.stdout


def test_a_run_recorded_through_a_server_replays_in_process(tmp_path):
    from conftest import run_python_code  # noqa: PLC0415

    path = tmp_path / "remote.vgtrace"
    with ServerProcess(tmp_path, memory_limit="512MiB") as server:
        recorded = run_python_code(_FIT, env={"VGPU_TRACE": str(path),
                                              "VGPU_BACKEND": server.address})
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    result = _vgpu("trace", "replay", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: replayed "), result.stdout


def test_unknown_executor_is_refused_listing_the_known_ones(fit_trace):
    result = _vgpu("trace", "replay", str(fit_trace), "--executor", "quantum")
    assert result.returncode != 0
    assert "unknown executor 'quantum'" in result.stderr, result.stderr
    assert "cpu" in result.stderr.split("offers")[-1]


def test_trace_usage_without_a_file_is_an_error():
    result = _vgpu("trace", "replay")
    assert result.returncode == 2
    assert "usage" in result.stderr


def test_two_devices_record_into_one_trace_with_their_ordinals(run_python, tmp_path):
    path = tmp_path / "two.vgtrace"
    result = run_python(_TWO_DEVICES, env={"VGPU_TRACE": str(path), "VGPU_DEVICE_COUNT": "2",
                                           "VGPU_MEMORY_LIMIT": "64MiB"})
    assert result.returncode == 0, result.stdout + result.stderr
    device_count, records = _records(path)
    assert device_count == 2
    assert {ordinal for _, ordinal, _ in records} == {0, 1}
    replay = _vgpu("trace", "replay", str(path))
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_info_shows_the_trace_file(run_python, tmp_path):
    path = tmp_path / "info.vgtrace"
    result = run_python("import vgpu, tensorflow as tf; print('trace=' + str(vgpu.info()['trace']))",
                        env={"VGPU_TRACE": str(path)})
    assert result.returncode == 0, result.stderr
    assert f"trace={path}" in result.stdout
    unset = run_python("import vgpu, tensorflow as tf; print('trace=' + str(vgpu.info()['trace']))")
    assert "trace=None" in unset.stdout, unset.stdout + unset.stderr


def test_a_trace_file_that_cannot_be_created_offers_no_device_and_says_why(run_python, tmp_path):
    path = tmp_path / "missing-folder" / "x.vgtrace"
    result = run_python("import vgpu, tensorflow as tf; print(vgpu.devices()); "
                        "print('declined=' + str(vgpu.info()['declined']))",
                        env={"VGPU_TRACE": str(path)})
    assert result.returncode == 0, result.stderr
    assert "[]" in result.stdout, result.stdout
    assert "declined=VGPU_TRACE: cannot create the trace file" in result.stdout, result.stdout
