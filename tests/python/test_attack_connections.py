"""Attacks on `vgpu server`'s connections and buffers through raw sockets (issue 10, findings 5, 6
and 9): device-to-host reads never drained, idle connections that never say Hello, too many
connections from one peer, file-descriptor exhaustion, and frames that declare 64 MiB and stall.
Each asserts that the server stays alive and bounded and that an honest bystander's work
completes with the right data."""
from __future__ import annotations

import os
import resource
import socket
import struct
import time

import numpy as np
import pytest

from raw_tenant import (
    ALLOCATE, COMMAND, CREATE_STREAM, HEADER, HELLO, MAGIC, MEMCPY_DTOH, MEMCPY_HTOD, REFUSED,
    REPLY, VERSION, WELCOME, RawTenant, Reply, ServerProcess, bystander_round_trip,
    command_payload, connect_socket, frame, receive_frame, wait_for,
)

MIB = 1 << 20


class SilentTenant:
    """A tenant that completes the handshake and its set-up calls, then sends commands and never
    reads what the server sends back (the attacker of the staging budget)."""

    def __init__(self, address):
        self.sock = connect_socket(address)
        self.sequence = 0
        self.sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, 0)))
        kind, _, _ = self._receive()
        assert kind == WELCOME, kind

    def _receive(self):
        return receive_frame(self.sock)

    def post(self, kind, **fields):
        self.sequence += 1
        self.sock.sendall(frame(COMMAND, self.sequence, command_payload(kind, **fields)))

    def call(self, kind, **fields):
        self.post(kind, **fields)
        while True:  # set-up only: nothing else is in flight yet
            reply_kind, sequence, payload = self._receive()
            if reply_kind == REPLY and sequence == self.sequence:
                return Reply(payload)

    def close(self):
        self.sock.close()


def read_refusal(sock, timeout=10.0):
    """The reason of a Refused frame the server sends on `sock` (None if it sends another)."""
    sock.settimeout(timeout)
    data = b""
    while len(data) < HEADER.size:
        chunk = sock.recv(HEADER.size - len(data))
        if not chunk:
            return None
        data += chunk
    _, _, kind, _, length, _ = HEADER.unpack(data)
    payload = b""
    while len(payload) < length:
        chunk = sock.recv(length - len(payload))
        if not chunk:
            break
        payload += chunk
    return payload[4:].decode(errors="replace") if kind == REFUSED else None


def closed_by_server(sock, timeout):
    """True once the server has closed `sock` (EOF or reset) within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def client_stats(server):
    return server.stats()["clients"]


def test_undrained_reads_are_bounded_by_the_staging_budget_and_reclaimed(tmp_path):
    flags = ["--max_staging_bytes=64MiB"]
    with ServerProcess(tmp_path, flags=flags) as server:
        attacker = SilentTenant(server.address)
        assert attacker.call(CREATE_STREAM, stream=1).ok
        reply = attacker.call(ALLOCATE, size=32 * MIB)
        assert reply.ok, reply
        source = reply.value
        rss_before = server.rss_bytes()
        for _ in range(40):  # 1.25 GiB of reads that the attacker never takes
            attacker.post(MEMCPY_DTOH, stream=1, src=source, size=32 * MIB, wants_host_data=True)
        staged = wait_for(lambda: [c["staging_bytes"] for c in client_stats(server)
                                   if c["staging_bytes"] > 0], 30, "staged reads")
        assert staged[0] <= 64 * MIB + 32 * MIB + 4096  # the budget, plus one read past it
        bystander_round_trip(server.address)  # meanwhile an honest tenant is served
        growth = server.rss_bytes() - rss_before
        assert growth < 200 * MIB, f"the server grew by {growth / MIB:.0f} MiB"
        attacker.close()
        wait_for(lambda: server.stats()["devices"][0]["bytes_in_use"] == 0
                 and not client_stats(server), 30, "the attacker's memory reclaimed")
        assert server.alive()
        bystander_round_trip(server.address)


def test_reads_past_the_staging_budget_complete_for_a_client_that_takes_its_data(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_staging_bytes=1MiB"]) as server:
        with RawTenant(server.address) as tenant:
            stream = tenant.create_stream()
            values = np.arange(64 * 1024, dtype=np.float32)  # 256 KiB
            address = tenant.allocate(values.nbytes)
            tenant.write(stream, address, values.tobytes())
            reads = [tenant.read_async(stream, address, values.nbytes) for _ in range(24)]
            assert tenant.synchronize(stream).ok
            for sequence in reads:
                np.testing.assert_array_equal(
                    np.frombuffer(tenant.wait_data(sequence), np.float32), values)


def test_connections_that_never_say_hello_are_capped_and_closed_after_the_deadline(tmp_path):
    flags = ["--handshake_timeout=1", "--max_connections=64", "--max_connections_per_peer=1000"]
    with ServerProcess(tmp_path, flags=flags) as server:
        idle = [connect_socket(server.address) for _ in range(64)]
        for _ in range(136):  # 200 in all
            sock = connect_socket(server.address)
            reason = read_refusal(sock)
            assert reason is not None and "--max_connections" in reason, reason
            sock.close()
        for sock in idle:  # closed by the handshake deadline
            assert closed_by_server(sock, timeout=20)
            sock.close()
        bystander_round_trip(server.address)  # under the cap again: served
        assert server.alive()
        assert "no hello within --handshake_timeout" in server.output()


def test_connections_from_one_peer_are_capped_with_a_clear_refusal(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_connections_per_peer=4"]) as server:
        tenants = [RawTenant(server.address) for _ in range(4)]
        with pytest.raises(ConnectionRefusedError, match="--max_connections_per_peer"):
            RawTenant(server.address)
        tenants.pop().close()

        def served():
            try:
                return bystander_round_trip(server.address) is not None
            except ConnectionRefusedError:
                return False  # the closed connection is reaped within a second

        wait_for(served, 20, "a connection once under the per-peer cap")
        for tenant in tenants:
            tenant.close()
        assert server.alive()


def test_a_peer_of_another_wire_version_is_refused_with_both_versions_named(tmp_path):
    with ServerProcess(tmp_path) as server:
        sock = connect_socket(server.address)
        hello = struct.pack("<HBI", 1, 0, 0)
        sock.sendall(HEADER.pack(MAGIC, 1, HELLO, 0, len(hello), 0) + hello)
        kind, _, payload = receive_frame(sock)
        sock.close()
        assert kind == REFUSED, kind
        reason = payload[4:].decode()
        assert f"version 1, this side version {VERSION}" in reason, reason
        assert bystander_round_trip(server.address) is not None
        assert server.alive()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_running_out_of_file_descriptors_does_not_spin_and_recovers(tmp_path):
    flags = ["--max_connections=1000", "--max_connections_per_peer=1000"]
    with ServerProcess(tmp_path, flags=flags) as server:
        pid = server.process.pid
        limit = len(os.listdir(f"/proc/{pid}/fd")) + 24
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
        holders = []
        for _ in range(40):  # more than the server can hold
            sock = connect_socket(server.address)
            sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, 0)))
            holders.append(sock)
        wait_for(lambda: len(os.listdir(f"/proc/{pid}/fd")) >= limit - 1, 20, "fds exhausted")
        pending = connect_socket(server.address)  # waits in the backlog for a descriptor
        reason = read_refusal(pending)
        assert reason is not None and "file descriptors" in reason, reason
        before = cpu_seconds(pid)
        time.sleep(2.0)  # measuring CPU time over a window, not waiting for an event
        spent = cpu_seconds(pid) - before
        assert spent < 0.5, f"the server used {spent:.2f} s of CPU in 2 s while out of fds"
        for sock in holders + [pending]:
            sock.close()

        def served():
            try:
                return bystander_round_trip(server.address) is not None
            except (ConnectionError, OSError):
                return False

        wait_for(served, 20, "a client served once descriptors are free")
        assert server.alive()


def test_stalled_frames_declaring_64_mib_do_not_cost_their_size(tmp_path):
    with ServerProcess(tmp_path) as server:
        rss_before = server.rss_bytes()
        stalled = []
        for _ in range(10):
            tenant = RawTenant(server.address)
            tenant.send_raw(HEADER.pack(MAGIC, VERSION, COMMAND, 1, 64 * MIB, 0) + b"\0" * 4096)
            stalled.append(tenant)
        bystander_round_trip(server.address)
        time.sleep(0.5)  # let the server's readers act on the headers before measuring
        growth = server.rss_bytes() - rss_before
        assert growth < 96 * MIB, f"the server grew by {growth / MIB:.0f} MiB"
        for tenant in stalled:
            tenant.close()
        wait_for(lambda: not client_stats(server), 20, "the stalled tenants gone")
        assert server.alive()


def test_a_stalled_frame_holding_the_receive_budget_times_out_and_others_proceed(tmp_path):
    flags = ["--max_receiving_bytes=4MiB", "--frame_timeout=2"]
    with ServerProcess(tmp_path, flags=flags) as server:
        staller = RawTenant(server.address)
        staller.send_raw(HEADER.pack(MAGIC, VERSION, COMMAND, 1, 16 * MIB, 0) + b"\0" * (4 * MIB))
        wait_for(lambda: server.stats()["receiving_bytes"] > 0, 20, "the stalled frame charged")
        time.sleep(1.2)  # one accept-loop tick: the bystander's frame starts after the staller's
        with RawTenant(server.address, timeout=60) as tenant:
            stream = tenant.create_stream()
            values = np.random.default_rng(0).normal(size=2 * MIB).astype(np.float32)  # 8 MiB
            address = tenant.allocate(values.nbytes)
            tenant.post(MEMCPY_HTOD, stream=stream, dst=address, size=values.nbytes,
                        host_data=values.tobytes())
            data = tenant.read(stream, address, values.nbytes)
            np.testing.assert_array_equal(np.frombuffer(data, np.float32), values)
        assert closed_by_server(staller.sock, timeout=20)
        assert "a frame stopped arriving (--frame_timeout)" in server.output()
        assert server.alive()
