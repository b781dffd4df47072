"""Attacks on a shared `vgpu server`'s host-memory budget (--max_staging_bytes): commands that
hold much more memory than they used to be charged for while they wait behind a stream the
tenant stalls (device-to-host reads it never takes). Each measures the server's resident memory
against the budget, then checks that an honest tenant is still served (bystander_round_trip).
Through raw sockets (tests/python/raw_tenant.py), no TensorFlow in the attacker."""
import socket
import struct
import time

import pytest

from raw_tenant import (ACTIVATION_FORWARD, ALLOCATE, COMMAND, COMMAND_BATCH, CREATE_STREAM,
                        DESCRIPTOR_CREATE, DESCRIPTOR_SET, ENTRY_DEFINE, ENTRY_TEMPLATED, HEADER,
                        HELLO, LAUNCH, MAGIC, MEMCPY_DTOH, RECORD_EVENT, REPLY,
                        SYNCHRONIZE_STREAM, TENSOR_DESCRIPTOR, VERSION, WAIT_EVENT, WELCOME,
                        Reply, ServerProcess, batch_entries, bystander_round_trip,
                        command_payload, connect_socket, frame, receive_frame, tensor_settings,
                        varint, wait_for)

MIB = 1 << 20


class StallingTenant:
    """A tenant over a raw socket that reads only the replies it waits for, with a small
    receive buffer: the data of its device-to-host reads stays unread, which stalls their
    stream on the server (its worker blocks writing them)."""

    def __init__(self, address):
        self.sock = connect_socket(address)
        self.sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, 0)))
        kind, _, payload = receive_frame(self.sock)
        assert kind == WELCOME, payload
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sequence = 0

    def post(self, kind, **fields):
        self.sequence += 1
        self.sock.sendall(frame(COMMAND, self.sequence, command_payload(kind, **fields)))
        return self.sequence

    def call(self, kind, **fields):
        sequence = self.post(kind, **fields)
        while True:
            frame_kind, frame_sequence, payload = receive_frame(self.sock)
            if frame_kind == REPLY and frame_sequence == sequence:
                return Reply(payload)

    def stall(self, stream):
        """Queues reads on `stream` that this tenant never takes."""
        source = self.call(ALLOCATE, size=4 * MIB).value
        for _ in range(3):
            self.post(MEMCPY_DTOH, stream=stream, src=source, size=MIB, wants_host_data=True)

    def send_until_blocked(self, data, seconds=5):
        """Sends `data` until the server stops reading (backpressure) or all of it went."""
        self.sock.settimeout(seconds)
        sent = 0
        try:
            while sent < len(data):
                sent += self.sock.send(data[sent:sent + MIB])
        except (socket.timeout, BlockingIOError):
            pass
        return sent

    def close(self):
        self.sock.close()


def expect_closed(tenant, send):
    """Runs `send` and expects the server to close the connection, answering nothing."""
    try:
        send()
    except ConnectionError:
        return  # closed while we were still sending
    tenant.sock.settimeout(10)
    with pytest.raises(ConnectionError):
        while True:
            receive_frame(tenant.sock)


def settled_rss(server, seconds=2.0):
    """The server's resident memory once it has stopped growing (sampled for `seconds`)."""
    peak = server.rss_bytes()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.25)
        peak = max(peak, server.rss_bytes())
    return peak


@pytest.fixture
def server(tmp_path):
    # A long frame timeout: the stalled reads must not end the attacker's connection mid-test.
    with ServerProcess(tmp_path, memory_limit="64MiB",
                       flags=["--max_staging_bytes=4MiB", "--frame_timeout=120"]) as process:
        yield process


def test_templated_launches_of_many_buffers_are_charged_for_their_buffers(server):
    """A 2-byte templated-launch entry queues a launch of 1024 buffers, each with a pin (~40 KiB);
    charged 512 B it grew the server ~50x past the budget (8000 of them: ~80 MiB)."""
    attacker = StallingTenant(server.address)
    assert attacker.call(CREATE_STREAM, stream=1).ok
    small = attacker.call(ALLOCATE, size=256).value
    attacker.stall(1)
    before = settled_rss(server, 1.0)
    launch = command_payload(LAUNCH, stream=1, obj=ACTIVATION_FORWARD,
                             buffers=[(small, 256)] * 1024)
    first = attacker.sequence + 1
    entries = [(first, varint(0) + launch, ENTRY_DEFINE)]
    entries += [(first + 1 + i, varint(0) + varint(0), ENTRY_TEMPLATED) for i in range(8000)]
    attacker.sequence += len(entries)
    attacker.send_until_blocked(frame(COMMAND_BATCH, 0, batch_entries(*entries)))
    growth = settled_rss(server) - before
    assert growth < 16 * MIB, f"{growth / MIB:.0f} MiB for a budget of 4 MiB"
    bystander_round_trip(server.address)
    attacker.close()
    assert server.alive(), server.output()


def test_launches_naming_descriptors_by_reference_are_charged_for_the_resolved_settings(tmp_path):
    """A launch may name forward-mode descriptors by id (11 bytes each on the wire); the queued
    launch holds their settings (up to 75 bytes each). Charged their wire size, templated
    launches of 255 references grew the server to ~5x its budget."""
    with ServerProcess(tmp_path, memory_limit="64MiB",
                       flags=["--max_staging_bytes=16MiB", "--frame_timeout=120"]) as server:
        attacker = StallingTenant(server.address)
        assert attacker.call(CREATE_STREAM, stream=1).ok
        assert attacker.call(DESCRIPTOR_CREATE, obj=7, params=bytes([TENSOR_DESCRIPTOR])).ok
        assert attacker.call(DESCRIPTOR_SET, obj=7, params=tensor_settings([1, 1, 1, 1])).ok
        attacker.stall(1)
        before = settled_rss(server, 1.0)
        references = bytes([255]) + struct.pack("<BHQ", TENSOR_DESCRIPTOR | 0x80, 8, 7) * 255
        launch = command_payload(LAUNCH, stream=1, obj=ACTIVATION_FORWARD,
                                 descriptors=references)
        first = attacker.sequence + 1
        entries = [(first, varint(0) + launch, ENTRY_DEFINE)]
        entries += [(first + 1 + i, varint(0) + varint(0), ENTRY_TEMPLATED) for i in range(6000)]
        attacker.sequence += len(entries)
        attacker.send_until_blocked(frame(COMMAND_BATCH, 0, batch_entries(*entries)))
        growth = settled_rss(server) - before
        assert growth < 32 * MIB, f"{growth / MIB:.0f} MiB for a budget of 16 MiB"
        bystander_round_trip(server.address)
        attacker.close()
        assert server.alive(), server.output()


def test_a_wait_on_an_event_recorded_on_many_streams_is_charged_per_recording(server):
    """One wait on an event recorded on 128 stalled streams queues 127 waits; each copied the
    whole command and was not charged (3000 waits: ~100 MiB past a 4 MiB budget)."""
    attacker = StallingTenant(server.address)
    streams = 128
    for stream in range(1, streams + 1):
        assert attacker.call(CREATE_STREAM, stream=stream).ok
    attacker.stall(1)
    attacker.post(RECORD_EVENT, stream=1, obj=1000)
    for stream in range(2, streams + 1):  # every other stream waits for the stalled one
        attacker.post(WAIT_EVENT, stream=stream, obj=1000)
    for stream in range(1, streams + 1):  # event 7: pending on all of them
        attacker.post(RECORD_EVENT, stream=stream, obj=7)
    before = settled_rss(server, 1.0)
    waits = b"".join(
        frame(COMMAND, attacker.sequence + 1 + i,
              command_payload(WAIT_EVENT, stream=streams, obj=7)) for i in range(3000))
    attacker.sequence += 3000
    attacker.send_until_blocked(waits)
    growth = settled_rss(server) - before
    assert growth < 16 * MIB, f"{growth / MIB:.0f} MiB for a budget of 4 MiB"
    bystander_round_trip(server.address)
    attacker.close()
    assert server.alive(), server.output()


@pytest.mark.parametrize("extra", [
    {"params": b"\0" * MIB}, {"descriptors": b"\0" * 1024}, {"buffers": [(0x1000, 16)] * 64}])
def test_only_a_launch_may_carry_buffers_parameters_and_descriptors(server, extra):
    """A synchronisation carrying a megabyte of parameters waited, decoded and uncharged, for a
    helper thread (32 per connection). Now such a frame is malformed: the connection closes."""
    attacker = StallingTenant(server.address)
    assert attacker.call(CREATE_STREAM, stream=1).ok
    expect_closed(attacker, lambda: attacker.post(SYNCHRONIZE_STREAM, stream=1, **extra))
    wait_for(lambda: "only a launch carries them" in server.output(), 10, "the server's log")
    bystander_round_trip(server.address)
    assert server.alive(), server.output()


def test_a_command_batch_over_four_mebibytes_closes_the_connection(server):
    """A 64 MiB batch of tiny entries was held whole, uncharged, while its entries queued behind
    a stalled stream (~95 MiB per connection). Batches are at most 4 MiB (an honest client's are
    at most 64 KiB plus one command)."""
    attacker = StallingTenant(server.address)
    header = HEADER.pack(MAGIC, VERSION, COMMAND_BATCH, 0, 4 * MIB + 1, 0)
    expect_closed(attacker, lambda: attacker.sock.sendall(header + b"\0" * 4096))
    wait_for(lambda: "a command batch of" in server.output(), 10, "the server's log")
    bystander_round_trip(server.address)
    assert server.alive(), server.output()


def test_template_ids_do_not_size_a_table_beyond_what_is_charged(server):
    """Defining template 16383 made the server allocate 16384 slots (~7 MiB) for a charge of
    ~600 B; 16 connections grew it ~110 MiB."""
    before = settled_rss(server, 1.0)
    attackers = []
    for _ in range(16):
        attacker = StallingTenant(server.address)
        assert attacker.call(CREATE_STREAM, stream=1).ok
        small = attacker.call(ALLOCATE, size=256).value
        launch = command_payload(LAUNCH, stream=1, obj=ACTIVATION_FORWARD,
                                 buffers=[(small, 256)])
        attacker.sequence += 1
        attacker.sock.sendall(frame(COMMAND_BATCH, 0, batch_entries(
            (attacker.sequence, varint(16383) + launch, ENTRY_DEFINE))))
        assert attacker.call(SYNCHRONIZE_STREAM, stream=1) is not None  # the batch was read
        attackers.append(attacker)
    growth = settled_rss(server) - before
    assert growth < 40 * MIB, f"{growth / MIB:.0f} MiB for 16 templates"
    for attacker in attackers:
        attacker.close()
    bystander_round_trip(server.address)
    assert server.alive(), server.output()
