"""Hostile trace files (issue 25, class 7; docs/traces.md, "Untrusted traces"): traces written
byte by byte, independently of the C++ writer, that once aborted the server binary, raised
MemoryError in Python, drove memory to 1.6 GiB or waited 300 s per record. Each is run through
`vgpu trace stats|replay` (python -m vgpu) and the `vgpu-server trace` executable, which must
answer with a clear message naming the problem, a non-zero exit code, no signal death, in a few
seconds and with a small peak RSS (read from the child's own rusage)."""
import os
import struct
import subprocess
import sys
import time
import zlib

import pytest

from vgpu import server as vgpu_server

TRACE_VERSION = 2
WIRE_VERSION = 4
# Command kinds (plugin/protocol/command.h) and record types (plugin/trace/trace_format.h).
ALLOCATE, CREATE_STREAM, MEMCPY_NOW, MEMCPY_DTOH, NOTIFY = 0, 3, 8, 13, 20
POST, CALL, RESULT, STEP, NOTIFIED = 1, 2, 3, 4, 5
HOST_DESTINATION = 2

# Far below the 1.6 GiB the one-record traces used to reach; a replay itself needs ~100 MiB.
MAX_PEAK_RSS_BYTES = 400 << 20
# Well under the 300 s a notification that never came used to cost (per record).
TIMEOUT_S = 60
FAST_S = 20


def file_header(version=TRACE_VERSION, memory_limit=256 << 20, reserved=0,
                producer=b"tensorflow-vgpu 0.9", backends=b""):
    fixed = b"VGPUTRAC" + struct.pack("<HHIQQQ", version, WIRE_VERSION, 1, memory_limit, 0,
                                      reserved)
    return (fixed + struct.pack("<I", len(producer)) + producer + struct.pack("<I", len(backends))
            + backends)


def record(record_type, body, reserved_byte=0, reserved_word=0, crc=None, length=None):
    """A record: the 24-byte header (its checksum over the header's first 16 bytes and the
    body, as format version 2 specifies) and the body."""
    fixed = struct.pack("<BBHIQ", record_type, reserved_byte, 0,
                        len(body) if length is None else length, 1000)
    if crc is None:
        crc = zlib.crc32(body, zlib.crc32(fixed))
    return fixed + struct.pack("<II", crc, reserved_word) + body


def command(kind, stream=0, token=0, src=0, size=0):
    """wire::EncodeCommand of a command without buffers, parameters or host data."""
    return struct.pack("<HBBIQQQQQQIIII", kind, 0, 0, 0, stream, 0, token, 0, src, size, 0, 0,
                       0, 0)


def command_body(kind, host_side=0, **fields):
    encoded = command(kind, **fields)
    return struct.pack("<I", len(encoded)) + encoded + bytes([host_side])


def ok_reply(value=0):
    return struct.pack("<iIQ", 0, 0, value) + bytes(48)


def post(kind, host_side=0, **fields):
    return record(POST, command_body(kind, host_side, **fields))


def call(kind, value=0, host_side=0, **fields):
    body = command_body(kind, host_side, **fields) + ok_reply(value)
    if host_side == HOST_DESTINATION:
        body += struct.pack("<BQ", 2, 0)  # result not captured
    return record(CALL, body)


def notified(token):
    return record(NOTIFIED, struct.pack("<Q", token))


# Runs argv[2:] as its child and writes the child's peak RSS (KiB) to argv[1]; exits as the child
# did (killed by the same signal if it was). A child forked straight from the test process would
# report that process's RSS at fork time as its peak (Linux keeps the high-water mark across
# exec), so the child is forked from this small interpreter instead.
_PEAK_RSS_TRAMPOLINE = """
import os, signal, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _run_child(argv, timeout=TIMEOUT_S):
    """Runs argv with its own rusage: (returncode, stdout, stderr, seconds, peak RSS bytes)."""
    import tempfile  # noqa: PLC0415

    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        returncode, out, err, seconds, _ = _run_direct(
            [sys.executable, "-c", _PEAK_RSS_TRAMPOLINE, rss_file.name, *argv], timeout)
        peak_kib = int(rss_file.read() or 0)
    return returncode, out, err, seconds, peak_kib * 1024


def _run_direct(argv, timeout):
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = start + timeout
    # Drain the pipes while waiting (outputs are small), then reap with wait4 for the rusage.
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(process.pid, 9)  # the trampoline and its child
            os.wait4(process.pid, 0)
            pytest.fail(f"{argv} ran past {timeout} s")
        time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)
    out, err = process.stdout.read().decode(), process.stderr.read().decode()
    process.stdout.close()
    process.stderr.close()
    return process.returncode, out, err, time.monotonic() - start, usage.ru_maxrss * 1024


RUNNERS = {
    "python": lambda *args: [sys.executable, "-m", "vgpu", "trace", *args],
    "server": lambda *args: [vgpu_server.binary_path(), "trace", *args],
}


@pytest.fixture(params=sorted(RUNNERS))
def run_trace(request, tmp_path):
    """run_trace(data, "stats"|"replay", *flags) -> (returncode, stderr, seconds, peak RSS)
    through `python -m vgpu trace` or `vgpu-server trace`."""

    def run(data, subcommand="stats", *flags, timeout=TIMEOUT_S):
        path = tmp_path / "hostile.vgtrace"
        path.write_bytes(data)
        code, out, err, seconds, rss = _run_child(
            RUNNERS[request.param](subcommand, str(path), *flags), timeout)
        assert code > 0, f"exit {code} (negative: killed by a signal)\n{out}\n{err}"
        assert code == 1, f"exit {code}\n{out}\n{err}"
        assert "Traceback" not in err and "MemoryError" not in err, err
        assert "terminate called" not in err, err
        assert rss < MAX_PEAK_RSS_BYTES, f"peak RSS {rss >> 20} MiB\n{err}"
        return err, seconds

    return run


def test_a_truncated_file_header_is_refused(run_trace):
    err, _ = run_trace(file_header()[:30])
    assert "truncated" in err and "byte offset" in err, err


def test_a_header_string_longer_than_the_file_is_refused(run_trace):
    data = bytearray(file_header(producer=b""))
    struct.pack_into("<I", data, 40, 60000)
    err, _ = run_trace(bytes(data), "replay")
    assert "header string of 60000 bytes is truncated" in err, err
    data = bytearray(file_header(producer=b""))
    struct.pack_into("<I", data, 40, 0xFFFFFFFF)
    err, _ = run_trace(bytes(data))
    assert "header string of 4294967295 bytes" in err, err


def test_a_record_declaring_a_4_gib_body_in_a_tiny_file_is_refused(run_trace):
    err, _ = run_trace(file_header() + record(STEP, struct.pack("<Q", 1), length=0xFFFFFFFF))
    assert "record 0" in err and "body of 4294967295 bytes truncated" in err, err


def test_the_168_byte_trace_declaring_an_exabyte_copy_is_refused_without_allocating(run_trace):
    data = file_header() + post(MEMCPY_DTOH, HOST_DESTINATION, stream=1, size=1 << 62)
    assert len(data) == 168  # the size of the file that aborted the server
    for subcommand in ("stats", "replay"):
        err, _ = run_trace(data, subcommand)
        assert "record 0 (memcpy_dtoh" in err and "byte offset 67" in err, err
        assert "does not lie inside one recorded allocation" in err, err


def test_one_record_traces_declaring_gibibytes_stay_small(run_trace):
    gib = 3 << 29  # 1.5 GiB: a zero-filled host buffer of this size was the 1.6 GiB peak
    err, _ = run_trace(file_header() + post(MEMCPY_DTOH, HOST_DESTINATION, stream=1, size=gib))
    assert "record 0" in err and "recorded allocation" in err, err
    err, _ = run_trace(file_header() + call(MEMCPY_NOW, host_side=HOST_DESTINATION, src=0x1000,
                                            size=gib))
    assert "record 0 (memcpy_sync" in err and "recorded allocation" in err, err


def test_a_recorded_petabyte_memory_limit_is_capped_by_the_replay(run_trace):
    # The header claims a PiB per device; the replay grants at most --memory_limit, so the
    # recorded 1.5 GiB allocation fails on replay instead of being granted.
    data = file_header(memory_limit=1 << 50) + call(ALLOCATE, value=0x10000, size=3 << 29)
    err, _ = run_trace(data, "replay", "--memory_limit=64MiB")
    assert "record 0 (allocate" in err and "failed on replay" in err, err


def test_copies_in_flight_are_bounded_by_the_memory_limit(run_trace):
    mib = 1 << 20
    data = (file_header() + call(ALLOCATE, value=0x10000, size=mib) + call(CREATE_STREAM, stream=1)
            + post(MEMCPY_DTOH, HOST_DESTINATION, stream=1, src=0x10000, size=mib) * 4)
    err, _ = run_trace(data, "replay", "--memory_limit=3MiB")
    assert "record 5" in err and "--memory_limit" in err, err


def test_a_notification_that_never_comes_fails_at_once(run_trace):
    data = file_header() + notified(12345) * 3
    err, seconds = run_trace(data, "replay")
    assert "record 0 (notified, token 12345" in err and "can never come" in err, err
    assert seconds < FAST_S


def test_a_notification_posted_once_but_named_twice_fails_at_once(run_trace):
    data = (file_header() + call(CREATE_STREAM, stream=1) + post(NOTIFY, stream=1, token=7)
            + notified(7) + notified(7))
    err, seconds = run_trace(data, "stats", "--wait_timeout=2")
    assert "record 3 (notified, token 7" in err and "can never come" in err, err
    assert seconds < FAST_S


@pytest.mark.parametrize("where", ["file header", "record byte 1", "record bytes 20-23"])
def test_a_nonzero_reserved_field_is_refused(run_trace, where):
    if where == "file header":
        data = file_header(reserved=1) + notified(1)
    elif where == "record byte 1":
        data = file_header() + record(NOTIFIED, struct.pack("<Q", 1), reserved_byte=1)
    else:
        data = file_header() + record(NOTIFIED, struct.pack("<Q", 1), reserved_word=0xDEAD)
    err, _ = run_trace(data)
    assert "reserved" in err and "byte offset" in err, err


def test_a_wrong_checksum_is_refused_naming_the_record(run_trace):
    good = record(STEP, struct.pack("<Q", 1))
    err, _ = run_trace(file_header() + good + record(STEP, struct.pack("<Q", 2), crc=12345))
    assert "record 1 (step): record checksum mismatch" in err, err
    # The header's time field is covered too (format version 2).
    tampered = bytearray(good)
    tampered[8] ^= 1
    err, _ = run_trace(file_header() + bytes(tampered))
    assert "record 0 (step): record checksum mismatch" in err, err


def test_format_version_1_is_not_supported(run_trace):
    data = file_header(version=1) + record(STEP, struct.pack("<Q", 1))
    err, _ = run_trace(data, "replay")
    assert "version 1 is not supported" in err and "record the trace again" in err, err


def test_bad_limits_on_the_command_line_are_usage_errors(tmp_path):
    path = tmp_path / "empty.vgtrace"
    path.write_bytes(file_header())
    for flag in ("--memory_limit=lots", "--wait_timeout=0"):
        result = subprocess.run([vgpu_server.binary_path(), "trace", "replay", str(path), flag],
                                capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        assert result.returncode == 2, result.stderr
        assert flag.split("=")[0] in result.stderr, result.stderr
    result = subprocess.run([sys.executable, "-m", "vgpu", "trace", "replay", str(path),
                             "--wait_timeout=0.5", "--memory_limit=64MiB"],
                            capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: replayed 0 commands"), result.stdout
