"""The shared-memory data path of a Unix-socket `vgpu server` (issue 14, item 1): TensorFlow
copies through the region are byte-identical to the socket path and to in-process, VGPU_SHM=0 and
TCP fall back to the socket, and raw-socket attacks on the region (bad offsets, oversize lengths,
descriptors of the wrong size or kind, no descriptor, unsealed memfds) are errors of the
attacker's connection only: the server stays alive and a bystander's work is intact."""
from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import subprocess
import sys
import textwrap

import pytest

from raw_tenant import (
    ALLOCATE, COMMAND, MEMCPY_HTOD, MEMCPY_NOW, OK, SHM_DATA, WANTS_HOST_DATA,
    RawTenant, ServerProcess, backend_env, bystander_round_trip, command_payload, frame,
    sealed_memfd,
)

LIBC = ctypes.CDLL(None, use_errno=True)
MIB = 1 << 20
REGION = 4 * MIB
INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS, RESOURCE_EXHAUSTED = 3, 9, 6, 8


@pytest.fixture
def server(tmp_path):
    process = ServerProcess(tmp_path, memory_limit="512MiB")
    yield process
    process.stop()


# Copies of several sizes (below the shared-memory threshold, at it, chunked) onto GPU:0 and
# back; prints a digest of every tensor read back.
COPIES = """
    import hashlib, json
    import numpy as np, tensorflow as tf
    import vgpu
    assert vgpu.is_available(), vgpu.info()
    rng = np.random.default_rng(7)
    digests = {}
    for count in (1000, 16384, 16385, 262147, 5 * 1048576 + 3):
        host = rng.integers(0, 2**31, size=count, dtype=np.int64).astype(np.float32)
        with tf.device("GPU:0"):
            device = tf.identity(tf.constant(host))
            doubled = device * 2
        back, twice = device.numpy(), doubled.numpy()
        assert back.tobytes() == host.tobytes(), count
        assert twice.tobytes() == (host * 2).tobytes(), count
        digests[count] = hashlib.sha256(back.tobytes() + twice.tobytes()).hexdigest()
    print("DIGESTS " + json.dumps(digests))
"""


def _digests(env):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(COPIES)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("DIGESTS "))
    return line.split(" ", 1)[1], done.stderr


def test_tensorflow_copies_through_shared_memory_match_the_socket_path_and_in_process(tmp_path):
    server = ServerProcess(tmp_path, memory_limit="512MiB")
    try:
        with_shm, _ = _digests(backend_env(server.address))
        without_shm, _ = _digests(backend_env(server.address, VGPU_SHM="0"))
    finally:
        server.stop()
    in_process, _ = _digests(backend_env("inproc"))
    assert with_shm == without_shm == in_process


def test_the_server_reports_the_region_and_vgpu_shm_0_goes_without(server):
    holder = """
        import sys, numpy as np, tensorflow as tf
        with tf.device("GPU:0"):
            x = tf.identity(tf.constant(np.ones(1 << 20, np.float32)))
        print("READY", flush=True)
        sys.stdin.readline()
    """
    for env, expected in ((backend_env(server.address), 64 * MIB),
                          (backend_env(server.address, VGPU_SHM="0"), 0)):
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(holder)], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "READY"
            clients = server.stats()["clients"]
            assert [c["shm_bytes"] for c in clients] == [expected], clients
        finally:
            child.communicate("\n", timeout=60)


def test_tcp_copies_go_through_the_socket(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ServerProcess(tmp_path, listen=f"tcp://127.0.0.1:{port}", memory_limit="512MiB")
    try:
        over_tcp, _ = _digests(backend_env(server.address))
    finally:
        server.stop()
    assert over_tcp == _digests(backend_env("inproc"))[0]


# -- raw-socket attacks on the region ---------------------------------------------------------

def _attached(server, size=REGION):
    tenant = RawTenant(server.address)
    fd = sealed_memfd(size)
    reply = tenant.attach_shm(fd, size)
    assert reply.ok, reply
    return tenant, fd


def _assert_unharmed(server):
    assert server.alive(), server.output()
    bystander_round_trip(server.address)


@contextlib.contextmanager
def _closes_only_that_connection(server, tenant, fd):
    """Around an attack by `tenant`: afterwards the server has closed the tenant's connection
    (its next call fails) and still serves a bystander. Closes the tenant and `fd` either way."""
    try:
        yield
        with pytest.raises((ConnectionError, TimeoutError)):
            tenant.call(ALLOCATE, size=16, timeout=10)
    finally:
        tenant.close()
        os.close(fd)
    _assert_unharmed(server)


def test_an_honest_raw_tenant_copies_through_its_region(server):
    tenant, fd = _attached(server)
    with tenant:
        region = os.fdopen(os.dup(fd), "r+b", buffering=0)
        payload = os.urandom(MIB)
        region.seek(4096)
        region.write(payload)
        stream = tenant.create_stream()
        address = tenant.allocate(MIB)
        assert tenant.wait_shm_copy(tenant.write_shm(stream, address, 4096, MIB))
        assert tenant.wait_shm_copy(tenant.read_shm(stream, address, 2 * MIB, MIB))
        region.seek(2 * MIB)
        assert region.read(MIB) == payload
        reply = tenant.call(MEMCPY_NOW, src=address, size=MIB, wants_host_data=True,
                            shm_offset=3 * MIB)
        assert reply.ok and reply.data == b"", reply
        region.seek(3 * MIB)
        assert region.read(MIB) == payload
        region.close()
    os.close(fd)
    _assert_unharmed(server)


@pytest.mark.parametrize("offset,size", [
    (REGION, 1),                    # just past the end
    (REGION - 8, 16),               # straddles the end
    (2**64 - 8, 16),                # offset + size wraps around 64 bits
    (0, REGION + 4096),             # oversize length
    (4096, 32 * MIB),               # oversize length at the chunk limit
])
def test_copies_outside_the_region_are_refused(server, offset, size):
    tenant, fd = _attached(server)
    with tenant:
        stream = tenant.create_stream()
        address = tenant.allocate(4096)
        # Asynchronous copies: a Data frame saying "not done", then the error at the sync.
        assert not tenant.wait_shm_copy(tenant.write_shm(stream, address, offset, size))
        assert not tenant.wait_shm_copy(tenant.read_shm(stream, address, offset, size))
        reply = tenant.synchronize(stream)
        assert not reply.ok, reply
        # A synchronous copy: the Reply says why.
        reply = tenant.call(MEMCPY_NOW, src=address, size=size, wants_host_data=True,
                            shm_offset=offset)
        assert not reply.ok, reply
        # The connection is still usable.
        assert tenant.wait_shm_copy(tenant.write_shm(stream, address, 0, 4096))
        assert tenant.synchronize(stream).ok
    os.close(fd)
    _assert_unharmed(server)


@pytest.mark.parametrize("size", [2**64 - 4, 40 * MIB])
def test_copy_lengths_past_the_chunk_limit_close_only_that_connection(server, size):
    tenant, fd = _attached(server)
    with _closes_only_that_connection(server, tenant, fd):
        stream = tenant.create_stream()
        address = tenant.allocate(4096)
        tenant.write_shm(stream, address, 8, size)


def test_shared_memory_copies_without_a_region_are_refused(server):
    with RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        address = tenant.allocate(4096)
        assert not tenant.wait_shm_copy(tenant.write_shm(stream, address, 0, 4096))
        reply = tenant.call(MEMCPY_NOW, dst=address, size=4096, shm_offset=0)
        assert reply.code == FAILED_PRECONDITION and "none is attached" in reply.message, reply
        assert not tenant.synchronize(stream).ok
    _assert_unharmed(server)


def _attach_reply(server, fd, size, payload=None):
    with RawTenant(server.address) as tenant:
        reply = tenant.attach_shm(fd, size, payload)
        # Whatever the answer, the connection goes on over the socket.
        stream = tenant.create_stream()
        address = tenant.allocate(16)
        tenant.write(stream, address, b"x" * 16)
        assert tenant.read(stream, address, 16) == b"x" * 16
        return reply


def test_an_attach_without_a_descriptor_is_refused(server):
    reply = _attach_reply(server, None, REGION)
    assert reply.code == INVALID_ARGUMENT and "no file descriptor" in reply.message, reply
    _assert_unharmed(server)


def test_a_memfd_of_the_wrong_size_is_refused(server):
    fd = sealed_memfd(REGION)
    try:
        for declared in (REGION * 2, REGION // 2, 0):
            reply = _attach_reply(server, fd, declared)
            assert reply.code == INVALID_ARGUMENT, reply
    finally:
        os.close(fd)
    _assert_unharmed(server)


def test_an_unsealed_memfd_is_refused(server):
    fd = sealed_memfd(REGION, seals=0)
    try:
        reply = _attach_reply(server, fd, REGION)
        assert "F_SEAL_SHRINK" in reply.message, reply
        # It could be truncated under the server's mapping: the reason for the seal.
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    _assert_unharmed(server)


def test_descriptors_that_are_not_memfds_are_refused(server, tmp_path):
    read_end, write_end = os.pipe()
    plain = tmp_path / "plain-file"
    plain.write_bytes(b"\0" * REGION)
    file_fd = os.open(plain, os.O_RDWR)
    socket_a, socket_b = socket.socketpair()
    try:
        for fd in (read_end, file_fd, socket_a.fileno()):
            reply = _attach_reply(server, fd, REGION)
            assert reply.code == INVALID_ARGUMENT, reply
    finally:
        for fd in (read_end, write_end, file_fd):
            os.close(fd)
        socket_a.close()
        socket_b.close()
    _assert_unharmed(server)


def test_an_oversized_region_and_a_second_attach_are_refused(server):
    fd = sealed_memfd(512 * MIB)  # virtual: pages exist only once touched
    try:
        reply = _attach_reply(server, fd, 512 * MIB)
        assert reply.code == RESOURCE_EXHAUSTED, reply
    finally:
        os.close(fd)
    tenant, fd = _attached(server)
    with tenant:
        reply = tenant.attach_shm(fd, REGION)
        assert reply.code == ALREADY_EXISTS, reply
    os.close(fd)
    _assert_unharmed(server)


def test_a_malformed_attach_frame_closes_only_that_connection(server):
    tenant = RawTenant(server.address)
    fd = sealed_memfd(REGION)
    with _closes_only_that_connection(server, tenant, fd):
        data = frame(10, 1, struct.pack("<QQ", REGION, 0))  # 16 bytes instead of 8
        socket.send_fds(tenant.sock, [data], [fd])


def test_the_tenant_rewriting_and_punching_its_region_mid_copy_harms_nobody(server):
    tenant, fd = _attached(server, 16 * MIB)
    with tenant:
        stream = tenant.create_stream()
        address = tenant.allocate(8 * MIB)
        sequences = []
        for i in range(20):
            sequences.append(tenant.write_shm(stream, address, 0, 8 * MIB))
            sequences.append(tenant.read_shm(stream, address, 8 * MIB, 8 * MIB))
            os.pwrite(fd, os.urandom(4096), (i * 4096) % (16 * MIB))
            # Punching holes is allowed with the shrink seal: pages read back as zeros.
            assert LIBC.fallocate(fd, 0x02 | 0x01, ctypes.c_long(0),  # PUNCH_HOLE | KEEP_SIZE
                                  ctypes.c_long(16 * MIB)) == 0
        for sequence in sequences:
            assert tenant.wait_shm_copy(sequence)
        assert tenant.synchronize(stream).ok
    os.close(fd)
    _assert_unharmed(server)


def test_flags_naming_shared_memory_on_the_wrong_side_close_only_that_connection(server):
    tenant, fd = _attached(server)
    with _closes_only_that_connection(server, tenant, fd):
        stream = tenant.create_stream()
        address = tenant.allocate(4096)
        tenant.send_raw(frame(COMMAND, 99, command_payload(
            MEMCPY_HTOD, stream=stream, dst=address, size=4096, shm_offset=0,
            flags=SHM_DATA | WANTS_HOST_DATA)))


def test_descriptors_sent_with_other_frames_do_not_pile_up_in_the_server(server):
    def open_descriptors():
        return len(os.listdir(f"/proc/{server.process.pid}/fd"))

    with RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        before = open_descriptors()
        spare = [sealed_memfd(4096) for _ in range(4)]
        try:
            for _ in range(50):
                data = frame(COMMAND, tenant.next_sequence(),
                             command_payload(ALLOCATE, size=256))
                socket.send_fds(tenant.sock, [data], spare)
            assert tenant.synchronize(stream).ok
            # None is kept: a descriptor belongs to the frame it came with, and only a
            # ShmAttach takes one; the others are closed once their frame has been read.
            assert open_descriptors() <= before, (before, open_descriptors())
        finally:
            for fd in spare:
                os.close(fd)
    _assert_unharmed(server)


def test_an_attach_over_tcp_is_refused_and_the_connection_goes_on(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ServerProcess(tmp_path, listen=f"tcp://127.0.0.1:{port}")
    try:
        reply = _attach_reply(server, None, REGION)
        assert reply.code == FAILED_PRECONDITION and "Unix socket" in reply.message, reply
        _assert_unharmed(server)
    finally:
        server.stop()


@pytest.mark.parametrize("flag", ["--noshared_memory", "--max_shm_bytes=1MiB"])
def test_a_server_that_takes_no_region_still_copies_everything_right(tmp_path, flag):
    """--noshared_memory, or a --max_shm_bytes below the client's region: the client is told no
    and every byte goes through the socket, with the same results."""
    server = ServerProcess(tmp_path, memory_limit="512MiB", flags=[flag])
    try:
        digests, stderr = _digests(backend_env(server.address))
        assert server.alive()
    finally:
        server.stop()
    assert digests == _digests(backend_env("inproc"))[0]
    assert "shared memory" in stderr or "shm" in stderr, stderr[-2000:]  # the refusal is logged


def test_resizing_and_sealing_the_memfd_during_the_attach_never_crashes_the_server(server):
    """Issue 25, class 1: the tenant flips its memfd's size between the region's and 0 while the
    server validates the attach, and seals it at a random moment. Whatever size the seal fixes,
    the server never maps (or touches) a page past the file's end."""
    import fcntl  # noqa: PLC0415
    import random  # noqa: PLC0415
    import threading  # noqa: PLC0415

    rng = random.Random(25)
    size = 4 * MIB
    attached = 0
    for _ in range(60):
        fd = os.memfd_create("racing", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        stop = threading.Event()
        flips_before_seal = rng.randrange(0, 200)

        def flip(fd=fd, stop=stop, flips=flips_before_seal):
            done = 0
            while not stop.is_set():
                os.ftruncate(fd, 0 if done % 2 == 0 else size)
                done += 1
                if done == flips:
                    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
                    return

        flipper = threading.Thread(target=flip)
        with RawTenant(server.address) as tenant:
            flipper.start()
            reply = tenant.attach_shm(fd, size)
            stop.set()
            flipper.join()
            if reply.ok:  # the copies touch every page of the region the server accepted
                attached += 1
                stream = tenant.create_stream()
                address = tenant.allocate(size)
                tenant.wait_shm_copy(tenant.write_shm(stream, address, 0, size))
                tenant.wait_shm_copy(tenant.read_shm(stream, address, 0, size))
                assert tenant.synchronize(stream).code in (OK, INVALID_ARGUMENT)
        os.close(fd)
        assert server.alive(), server.output()
    _assert_unharmed(server)
