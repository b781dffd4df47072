"""Attacks on what `vgpu server` reclaims and bounds per tenant, through raw sockets (issue 25,
classes 2 and 3): a tenant passing its own socket with a command and exiting, stream ids reused
to make a wait on an old event wait forever, SIGTERM with a tenant's work queued, commands piled
up behind a stalled stream, and allocations by the million. Each asserts that the server stays
alive and bounded, reclaims the tenant, and that an honest bystander's work completes."""
from __future__ import annotations

import signal
import socket
import struct
import time

import pytest

from raw_tenant import (
    COMMAND, DESTROY_STREAM, HELLO, MEMCPY_DTOH, MEMSET, NOTIFY_KIND, RECORD_EVENT, VERSION,
    WAIT_EVENT, WELCOME, ALLOCATE, CREATE_STREAM, RawTenant, ServerProcess, bystander_round_trip,
    batch_entries, command_payload, connect_socket, frame, receive_frame, wait_for,
)

MIB = 1 << 20
RESOURCE_EXHAUSTED = 8


def device_bytes_in_use(server):
    return server.stats()["devices"][0]["bytes_in_use"]


def test_a_tenant_that_passes_its_own_socket_and_exits_is_seen_to_disconnect(tmp_path):
    with ServerProcess(tmp_path) as server:
        # A socket no other thread reads: a RawTenant's reader thread blocked in recv() would
        # keep the socket open after close() (the kernel holds it for the call), so whether it
        # ever ended would depend on whether the server's answer came before the close or after.
        sock = connect_socket(server.address)
        sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, 0)))
        assert receive_frame(sock)[0] == WELCOME
        sock.sendall(frame(COMMAND, 1, command_payload(ALLOCATE, size=4 * MIB)))
        assert receive_frame(sock)[1] == 1  # the allocation's reply
        assert device_bytes_in_use(server) >= 4 * MIB
        # Its own socket, passed on a frame that expects no descriptor: were the server to keep
        # it, the connection would never reach end of stream.
        data = frame(COMMAND, 2, command_payload(NOTIFY_KIND, stream=0))
        socket.send_fds(sock, [data], [sock.fileno()])
        sock.close()  # as a process that exits: no shutdown(), only its descriptor goes
        wait_for(lambda: not server.stats()["clients"], 10, "the tenant seen as gone")
        wait_for(lambda: device_bytes_in_use(server) == 0, 10, "its memory reclaimed")
        bystander_round_trip(server.address)
        assert server.alive()


def test_a_wait_on_an_event_of_a_destroyed_stream_whose_id_is_reused_does_not_hang(tmp_path):
    with ServerProcess(tmp_path) as server:
        with RawTenant(server.address, timeout=20) as tenant:
            first = tenant.create_stream()  # id 1
            for _ in range(5):  # the event's position on the old stream is 6
                tenant.notify(first)
            tenant.post(RECORD_EVENT, stream=first, obj=77, token=1000)
            assert tenant.wait_notified(1000)[0] == 0
            assert tenant.call(DESTROY_STREAM, stream=first).ok
            reply = tenant.call(CREATE_STREAM, stream=first)  # the same id, a new stream
            assert reply.ok, reply
            other = tenant.create_stream()
            tenant.post(WAIT_EVENT, stream=other, obj=77)
            token = tenant.notify(other)
            # The old stream's work has all run: the wait is over at once.
            assert tenant.wait_notified(token, timeout=10)[0] == 0
            assert tenant.synchronize(other, timeout=10).ok
        bystander_round_trip(server.address)
        assert server.alive()


def test_sigterm_stops_the_server_promptly_with_a_tenants_work_queued(tmp_path):
    server = ServerProcess(tmp_path, memory_limit="512MiB")
    try:
        tenant = RawTenant(server.address)
        stream = tenant.create_stream()
        count = 32 * MIB // 4
        x, y = tenant.allocate(4 * count), tenant.allocate(4 * count)
        for _ in range(20_000):  # minutes of work queued on one stream
            tenant.relu(stream, x, y, count)
        token = tenant.notify(stream)
        time.sleep(0.5)  # the first launches are running
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        returncode = server.process.wait(timeout=30)
        took = time.monotonic() - started
        assert returncode == 0, server.output()
        assert took < 10, f"SIGTERM took {took:.1f} s with queued work"
        assert "vgpu server: stopped" in server.output()
        with pytest.raises((ConnectionError, TimeoutError)):
            tenant.wait_notified(token, timeout=5)
        tenant.close()
    finally:
        server.stop()


COMMAND_BATCH = 11


@pytest.mark.parametrize("framing", ["command frames", "batches"])
def test_commands_queued_behind_a_stalled_stream_are_bounded_by_the_staging_budget(tmp_path,
                                                                                   framing):
    flags = ["--max_staging_bytes=16MiB", "--frame_timeout=60"]
    with ServerProcess(tmp_path, flags=flags) as server:
        sock = connect_socket(server.address)
        sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, 0)))
        assert receive_frame(sock)[0] == WELCOME
        sequence = 0

        def call(kind, **fields):
            nonlocal sequence
            sequence += 1
            sock.sendall(frame(COMMAND, sequence, command_payload(kind, **fields)))
            while True:
                _, answered, payload = receive_frame(sock)
                if answered == sequence:
                    return struct.unpack_from("<iI", payload)[0], payload

        assert call(CREATE_STREAM, stream=1)[0] == 0
        code, payload = call(ALLOCATE, size=4 * MIB)
        assert code == 0
        length = struct.unpack_from("<I", payload, 4)[0]
        address = struct.unpack_from("<Q", payload, 8 + length)[0]
        # Reads whose data this tenant never takes: the stream blocks writing them.
        for _ in range(3):
            sequence += 1
            sock.sendall(frame(COMMAND, sequence, command_payload(
                MEMCPY_DTOH, stream=1, src=address, size=MIB, wants_host_data=True)))
        time.sleep(0.5)
        rss_before = server.rss_bytes()
        # Then empty commands queue behind it, as fast as the server reads them.
        empty = command_payload(MEMSET, stream=1, dst=address, size=0, pattern_bytes=1)
        if framing == "command frames":
            flood = b"".join(frame(COMMAND, sequence + 1 + i, empty) for i in range(400_000))
        else:  # 4 MiB batches of ~50 000 entries each
            batches = []
            for b in range(8):
                first = sequence + 1 + b * 50_000
                batches.append(frame(COMMAND_BATCH, 0, batch_entries(
                    *((first + i, empty) for i in range(50_000)))))
            flood = b"".join(batches)
        sock.settimeout(3)
        sent = 0
        try:
            while sent < len(flood):
                sent += sock.send(flood[sent:sent + (1 << 20)])
        except (socket.timeout, BlockingIOError):
            pass  # the server stopped reading this tenant: backpressure
        time.sleep(1.0)  # let the server's reader act on what it received before measuring
        growth = server.rss_bytes() - rss_before
        queued = server.stats()["queued_commands"]
        assert sent < len(flood), "the server read every command: nothing bounded the queue"
        assert growth < 48 * MIB, f"the server grew by {growth / MIB:.0f} MiB ({queued} queued)"
        assert queued < 40_000, queued
        bystander_round_trip(server.address)
        sock.close()
        wait_for(lambda: not server.stats()["clients"], 20, "the stalled tenant reclaimed")
        assert server.alive()


def test_allocations_per_client_are_capped_with_a_clear_error(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_allocations_per_client=100"]) as server:
        with RawTenant(server.address) as tenant:
            for _ in range(100):
                tenant.allocate(0)
            reply = tenant.call(ALLOCATE, size=0)
            assert reply.code == RESOURCE_EXHAUSTED, reply
            assert "--max_allocations_per_client=100" in reply.message, reply
        bystander_round_trip(server.address)
        assert server.alive()


def test_tenant_names_by_the_thousand_keep_the_servers_totals_bounded(tmp_path):
    """Tenant names are the client's choice: a tenant cycling through names cannot grow the
    table of finished tenants' totals without bound (past 1024 they are summed together)."""
    flags = ["--max_connections=2000", "--max_connections_per_peer=2000"]
    with ServerProcess(tmp_path, flags=flags) as server:
        for i in range(1100):
            RawTenant(server.address, tenant=f"name-{i}").close()
        wait_for(lambda: not server.stats()["clients"], 30, "every connection reaped")
        names = [tenant["name"] for tenant in server.stats()["tenants"]]
        assert len(names) <= 1025, len(names)
        assert "(other tenants)" in names
        bystander_round_trip(server.address)
        assert server.alive()
