"""A `vgpu server` in a child process and a hand-written tenant that speaks the wire format
(plugin/protocol/wire_format.h) over a raw socket, as an attacker would: no TensorFlow, no client
library. The attack tests build hostile frames with it; the bystander tenants use its honest
helpers (allocate, write, relu, read) to show that their data and work survive."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HEADER = struct.Struct("<IHHQII")  # magic, version, type, sequence, payload length, reserved
MAGIC, VERSION = 0x55504756, 7
HELLO, WELCOME, REFUSED, COMMAND, REPLY, DATA, NOTIFY = 1, 2, 3, 4, 5, 6, 7
SHM_ATTACH = 10
PROFILE_CONTROL, PROFILE_RECORDS = 12, 13
PROFILE_START, PROFILE_COLLECT = 1, 2
# The 72-byte fixed part of a Command: kind, pattern_bytes, flags, device, stream, object, token,
# dst, src, size, pattern, buffer count, params length, descriptors length.
COMMAND_FIXED = struct.Struct("<HBBIQQQQQQIIII")
HAS_HOST_DATA, WANTS_HOST_DATA, SHM_DATA = 0x1, 0x2, 0x4

# CommandKind (plugin/protocol/command.h).
(ALLOCATE, FREE, MEMORY_INFO, CREATE_STREAM, DESTROY_STREAM, SYNCHRONIZE_STREAM,
 SYNCHRONIZE_DEVICE, STREAM_STATUS, MEMCPY_NOW, DESCRIPTOR_CREATE, DESCRIPTOR_SET,
 DESCRIPTOR_DESTROY, MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD, MEMSET, LAUNCH, RECORD_EVENT,
 WAIT_EVENT, DESTROY_EVENT, NOTIFY_KIND) = range(21)

# Descriptor kinds and the settings this module encodes (plugin/protocol/descriptors.h).
TENSOR_DESCRIPTOR, ACTIVATION_DESCRIPTOR = 1, 5
FLOAT32 = 1
RELU = 0
ACTIVATION_FORWARD = 100  # protocol/kernels/activation.h: descriptors [activation, tensor]
OK = 0


def tensor_settings(dims, dtype=FLOAT32):
    """TensorDescriptorSettings: dtype, rank, 8 int64 dims (72 bytes)."""
    dims = list(dims)
    return struct.pack("<Ii8q", dtype, len(dims), *(dims + [0] * (8 - len(dims))))


def activation_settings(mode=RELU, dtype=FLOAT32, coef=0.0):
    """ActivationDescriptorSettings: mode, dtype, coef (16 bytes)."""
    return struct.pack("<iId", mode, dtype, coef)


def descriptor_section(*entries):
    """A launch's descriptor section from (kind, settings bytes) pairs."""
    out = struct.pack("<B", len(entries))
    for kind, settings in entries:
        out += struct.pack("<BH", kind, len(settings)) + settings
    return out


def wait_for(predicate, timeout, what):
    """Polls `predicate` until it returns something true, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)  # polling a condition with a deadline, not a synchronisation
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def backend_env(backend, **extra):
    """This process's environment without its VGPU_* settings, for a TensorFlow child whose
    VGPU_BACKEND is `backend` (a server address or "inproc"), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update({"VGPU_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}, **extra)
    return env


class ChildProcess:
    """A child process (`self.process`) with its log file (`self.log`): SIGTERM on stop (then
    SIGKILL after 15 s), usable as a context manager."""

    def _start_server(self, command, ready, log_path, what, **popen_args):
        """Starts `command` with its output in the file `log_path` and waits (30 s at most) for
        the server to write its address to the file `ready`; that address is `self.address`."""
        self.log = open(log_path, "w+")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        **popen_args)
        wait_for(lambda: ready.exists() or self.process.poll() is not None, 30, what)
        assert self.process.poll() is None, self.output()
        self.address = ready.read_text()

    def output(self):
        """Everything the child has written to its log so far."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class ServerProcess(ChildProcess):
    """`python -m vgpu.server` in a child process on a Unix socket (or `listen`), with its log
    in a file. `flags` are extra command-line flags (e.g. ["--client_quota=1MiB"])."""

    def __init__(self, tmp_path, listen=None, flags=(), memory_limit="256MiB", token=None):
        tag = time.monotonic_ns()
        ready = tmp_path / f"ready-{tag}"
        listen = listen or f"unix://{tmp_path}/vgpu-{tag}.sock"
        command = [sys.executable, "-m", "vgpu.server", f"--listen={listen}",
                   f"--memory_limit={memory_limit}", f"--ready_file={ready}",
                   "--compute_threads=2", *flags]
        if token:
            token_file = tmp_path / f"token-{tag}"
            token_file.write_text(token)
            command.append(f"--token_file={token_file}")
        self._start_server(command, ready, tmp_path / f"server-{tag}.log", "the server")

    def alive(self):
        return self.process.poll() is None

    def stats(self, token=""):
        from vgpu import _core  # noqa: PLC0415 - the observer client of the test's own process

        return json.loads(_core.query_server_stats(self.address, token))

    def rss_bytes(self):
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0



def connect_socket(address, timeout=10.0):
    """A connected, unauthenticated socket to a unix:// or tcp:// address."""
    if address.startswith("unix://"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(address[len("unix://"):])
        return sock
    host, port = address[len("tcp://"):].rsplit(":", 1)
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    return sock


def frame(kind, sequence, payload):
    return HEADER.pack(MAGIC, VERSION, kind, sequence, len(payload), 0) + payload


def command_payload(kind, *, device=0, stream=0, obj=0, token=0, dst=0, src=0, size=0,
                    pattern=0, pattern_bytes=0, buffers=(), params=b"", descriptors=b"",
                    host_data=None, wants_host_data=False, shm_offset=None, flags=None):
    """The payload of a Command frame (fields as in wire_format.h). `shm_offset`: the host side
    is in the connection's shared region (flag kShmData, the offset after the descriptors).
    `flags` overrides the flags byte."""
    if flags is None:
        flags = (HAS_HOST_DATA if host_data is not None else 0) | \
            (WANTS_HOST_DATA if wants_host_data else 0) | \
            (SHM_DATA if shm_offset is not None else 0)
    out = COMMAND_FIXED.pack(kind, pattern_bytes, flags, device, stream, obj, token, dst, src,
                             size, pattern, len(buffers), len(params), len(descriptors))
    for address, length in buffers:
        out += struct.pack("<QQ", address, length)
    out += params + descriptors
    if host_data is not None:
        out += host_data
    if shm_offset is not None:
        out += struct.pack("<Q", shm_offset)
    return out


COMMAND_BATCH = 11
# CommandBatch entry forms (wire_format.h).
ENTRY_COMMAND, ENTRY_DEFINE, ENTRY_TEMPLATED, ENTRY_RELEASE, ENTRY_COMPACT = range(5)


def varint(value):
    """LEB128: seven bits a byte, least significant first, the high bit on all but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def batch_entries(*entries):
    """A CommandBatch payload of (sequence, body) or (sequence, body, form) entries: each is
    varint zigzag(sequence delta), varint length << 3 | form, body."""
    out, previous = bytearray(), 0  # a bytearray grows in place; bytes += copies each time
    for sequence, body, *form in entries:
        delta = sequence - previous
        out += varint(2 * delta if delta >= 0 else -2 * delta - 1)
        out += varint(len(body) << 3 | (form[0] if form else ENTRY_COMMAND))
        out += body
        previous = sequence
    return bytes(out)


def sealed_memfd(size, seals=None):
    """A memfd of `size` bytes, sealed as an honest client seals its region (or with `seals`)."""
    import fcntl  # noqa: PLC0415

    fd = os.memfd_create("raw-tenant", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seals is None:
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def read_exact(sock, size):
    """Exactly `size` bytes from `sock` (ConnectionError if it closes first)."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return bytes(data)


def receive_frame(sock):
    """The next frame on `sock`: (message type, sequence, payload)."""
    _, _, kind, sequence, length, _ = HEADER.unpack(read_exact(sock, HEADER.size))
    return kind, sequence, read_exact(sock, length)


class Reply:
    def __init__(self, payload):
        self.code, length = struct.unpack_from("<iI", payload)
        self.message = payload[8:8 + length].decode(errors="replace")
        self.value = struct.unpack_from("<Q", payload, 8 + length)[0]
        self.memory = struct.unpack_from("<6Q", payload, 16 + length)
        self.data = payload[8 + length + 56:]

    @property
    def ok(self):
        return self.code == OK

    def __repr__(self):
        return f"Reply(code={self.code}, message={self.message!r}, value={self.value:#x})"


class RawTenant:
    """One tenant connection. A reader thread files every frame the server sends: replies and
    data by sequence, notifications by token. Every wait is bounded by `timeout` seconds."""

    def __init__(self, address, token="", timeout=30.0, tenant=None):
        self.timeout = timeout
        self.sock = connect_socket(address, timeout)
        self._sequence = 0
        self._next_stream = 1
        self._next_token = 1
        self._lock = threading.Condition()
        self._frames = {}      # sequence -> (type, payload)
        self._notified = {}    # token -> (code, message)
        self.closed = False
        token_bytes = token.encode()
        hello = struct.pack("<HBI", VERSION, 0, len(token_bytes)) + token_bytes
        if tenant is not None:  # the optional tenant name (VGPU_TENANT)
            tenant_bytes = tenant.encode()
            hello += struct.pack("<I", len(tenant_bytes)) + tenant_bytes
        self.sock.sendall(frame(HELLO, 0, hello))
        kind, _, payload = self._receive()
        if kind != WELCOME:
            raise ConnectionRefusedError(payload[4:].decode(errors="replace"))
        (self.device_count, self.memory_limit, self.quota,
         self.template_bytes) = struct.unpack("<IQQQ", payload)
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # -- framing --------------------------------------------------------------------------
    def _receive(self):
        return receive_frame(self.sock)

    def _read_loop(self):
        try:
            while True:
                kind, sequence, payload = self._receive()
                with self._lock:
                    if kind == NOTIFY:
                        token, code, length = struct.unpack_from("<QiI", payload)
                        self._notified[token] = (code, payload[16:16 + length].decode())
                    else:
                        self._frames[sequence] = (kind, payload)
                    self._lock.notify_all()
        except (OSError, ConnectionError, struct.error):
            with self._lock:
                self.closed = True
                self._lock.notify_all()

    def _wait(self, what, predicate, timeout=None):
        found = []

        def ready():
            value = predicate()  # may consume what it finds: evaluated once per wake-up
            if value:
                found.append(value)
            return bool(found) or self.closed

        with self._lock:
            if not self._lock.wait_for(ready, timeout or self.timeout):
                raise TimeoutError(f"no answer from the server for {what}")
            if not found:
                raise ConnectionError(f"connection closed while waiting for {what}")
            return found[0]

    def send_raw(self, data):
        self.sock.sendall(data)

    def attach_shm(self, fd, size, payload=None):
        """Sends a ShmAttach frame declaring `size` with `fd` (None: no descriptor) and returns
        the server's Reply."""
        sequence = self.next_sequence()
        data = frame(SHM_ATTACH, sequence, struct.pack("<Q", size) if payload is None else payload)
        if fd is None:
            self.sock.sendall(data)
        else:
            sent = socket.send_fds(self.sock, [data], [fd])
            if sent < len(data):
                self.sock.sendall(data[sent:])
        kind, answer = self._wait("shm attach", lambda: self._frames.pop(sequence, None))
        assert kind == REPLY, kind
        return Reply(answer)

    def write_shm(self, stream, address, offset, size):
        """Queues a host-to-device copy of `size` bytes at `offset` of the shared region;
        returns its sequence (the server answers with a Data frame: see wait_data)."""
        return self.post(MEMCPY_HTOD, stream=stream, dst=address, size=size, shm_offset=offset)

    def read_shm(self, stream, address, offset, size):
        """Queues a device-to-host copy into the shared region; returns its sequence."""
        return self.post(MEMCPY_DTOH, stream=stream, src=address, size=size,
                         wants_host_data=True, shm_offset=offset)

    def wait_shm_copy(self, sequence, timeout=None):
        """True if the shared-memory copy `sequence` ran, False if it was refused or skipped."""
        kind, payload = self._wait(f"data of {sequence}",
                                   lambda: self._frames.pop(sequence, None), timeout)
        assert kind == DATA, kind
        assert len(payload) == 1, len(payload)
        return payload[0] == 1

    def next_sequence(self):
        self._sequence += 1
        return self._sequence

    def post(self, kind, **fields):
        """Sends an asynchronous command (no reply); returns its sequence."""
        sequence = self.next_sequence()
        self.sock.sendall(frame(COMMAND, sequence, command_payload(kind, **fields)))
        return sequence

    def call(self, kind, timeout=None, **fields):
        """Sends a call and waits for its Reply."""
        sequence = self.post(kind, **fields)
        kind_, payload = self._wait(f"command {kind}", lambda: self._frames.pop(sequence, None),
                                    timeout)
        assert kind_ == REPLY, kind_
        return Reply(payload)

    # -- honest helpers -----------------------------------------------------------------
    def allocate(self, size, device=0):
        reply = self.call(ALLOCATE, device=device, size=size)
        assert reply.ok, reply
        return reply.value

    def free(self, address):
        return self.call(FREE, dst=address)

    def create_stream(self, device=0):
        stream = self._next_stream
        self._next_stream += 1
        reply = self.call(CREATE_STREAM, device=device, stream=stream)
        assert reply.ok, reply
        return stream

    def synchronize(self, stream, timeout=None):
        return self.call(SYNCHRONIZE_STREAM, stream=stream, timeout=timeout)

    def write(self, stream, address, data):
        """Queues a host-to-device copy of `data` to `address`."""
        return self.post(MEMCPY_HTOD, stream=stream, dst=address, size=len(data),
                         host_data=bytes(data))

    def read_async(self, stream, address, size):
        """Queues a device-to-host copy; returns its sequence (see wait_data)."""
        return self.post(MEMCPY_DTOH, stream=stream, src=address, size=size,
                         wants_host_data=True)

    def wait_data(self, sequence, timeout=None):
        """The bytes of an asynchronous read (None if the stream had failed)."""
        kind, payload = self._wait(f"data of {sequence}",
                                   lambda: self._frames.pop(sequence, None), timeout)
        assert kind == DATA, kind
        return payload[1:] if payload[0] == 1 else None

    def read(self, stream, address, size, timeout=None):
        return self.wait_data(self.read_async(stream, address, size), timeout)

    def read_now(self, address, size):
        """A synchronous device-to-host copy (kMemcpyNow)."""
        return self.call(MEMCPY_NOW, src=address, size=size, wants_host_data=True)

    def notify(self, stream):
        """Queues a notification; returns its token (see wait_notified)."""
        token = self._next_token
        self._next_token += 1
        self.post(NOTIFY_KIND, stream=stream, token=token)
        return token

    def wait_notified(self, token, timeout=None):
        return self._wait(f"notification {token}", lambda: self._notified.pop(token, None),
                          timeout)

    def relu(self, stream, x, y, count):
        """Queues y = relu(x) over `count` float32 elements."""
        return self.post(
            LAUNCH, stream=stream, obj=ACTIVATION_FORWARD,
            buffers=[(x, 4 * count), (y, 4 * count)],
            descriptors=descriptor_section((ACTIVATION_DESCRIPTOR, activation_settings()),
                                           (TENSOR_DESCRIPTOR, tensor_settings([count]))))

    def profile(self, action, timeout=None):
        """Sends a ProfileControl (PROFILE_START or PROFILE_COLLECT) and returns its answer:
        (server clock ns, dropped, [(sequence, start ns, end ns, kernel name or None)])."""
        sequence = self.next_sequence()
        self.sock.sendall(frame(PROFILE_CONTROL, sequence, bytes([action])))
        kind, payload = self._wait("profile records", lambda: self._frames.pop(sequence, None),
                                   timeout)
        assert kind == PROFILE_RECORDS, kind
        server_now, dropped, name_count = struct.unpack_from("<qQI", payload)
        offset, names = 20, []
        for _ in range(name_count):
            (length,) = struct.unpack_from("<I", payload, offset)
            names.append(payload[offset + 4:offset + 4 + length].decode())
            offset += 4 + length
        (count,) = struct.unpack_from("<I", payload, offset)
        offset += 4
        records = []
        for _ in range(count):
            seq, start, end, name = struct.unpack_from("<QqqI", payload, offset)
            offset += 28
            records.append((seq, start, end, names[name - 1] if name else None))
        assert offset == len(payload), (offset, len(payload))
        return server_now, dropped, records

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bystander_round_trip(address, count=1024, timeout=30.0, token=""):
    """An honest tenant's whole job: write data, relu it on the device, read it back. Returns
    the result's float32 values (asserting they are right). `token`: the server's, if any."""
    import numpy as np  # noqa: PLC0415

    values = np.linspace(-1, 1, count, dtype=np.float32)
    with RawTenant(address, token=token, timeout=timeout) as tenant:
        stream = tenant.create_stream()
        x, y = tenant.allocate(4 * count), tenant.allocate(4 * count)
        tenant.write(stream, x, values.tobytes())
        tenant.relu(stream, x, y, count)
        data = tenant.read(stream, y, 4 * count)
        reply = tenant.synchronize(stream)
        assert reply.ok, reply
        result = np.frombuffer(data, np.float32)
        np.testing.assert_array_equal(result, np.maximum(values, 0))
        return result


def pipelined_calls(tenant, kind, fields_list, timeout=None):
    """Sends one call of `kind` per dict in `fields_list` without waiting in between, then
    collects their Replies in order (a flood at socket speed, not at round-trip speed)."""
    sequences = [tenant.post(kind, **fields) for fields in fields_list]
    replies = []
    for sequence in sequences:
        kind_, payload = tenant._wait(f"command {kind} #{sequence}",  # noqa: SLF001
                                      lambda s=sequence: tenant._frames.pop(s, None), timeout)  # noqa: SLF001
        assert kind_ == REPLY, kind_
        replies.append(Reply(payload))
    return replies
