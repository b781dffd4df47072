"""Attacks on the memory isolation of a shared `vgpu server` (issue 10, findings 1, 2, 4 and 7),
each through a raw socket speaking the wire format (tests/python/raw_tenant.py), no TensorFlow in
the attacker: freeing memory that queued work still uses, reading a previous tenant's bytes,
exhausting the device with allocations the quota does not charge, and flooding the server with
streams. Each asserts that the server is alive, that the other tenant's data is intact and that
an honest tenant's work (bystander_round_trip) still completes."""
import struct

import numpy as np
import pytest

from raw_tenant import (ALLOCATE, CREATE_STREAM, RawTenant, ServerProcess, bystander_round_trip,
                        pipelined_calls, wait_for)

RESOURCE_EXHAUSTED, INVALID_ARGUMENT, PERMISSION_DENIED = 8, 3, 7


@pytest.fixture
def server(tmp_path):
    with ServerProcess(tmp_path, memory_limit="64MiB") as process:
        yield process


def relu_in_place(tenant, stream, address, count):
    """Queues x = relu(x) over `count` float32 elements (reads and writes x)."""
    return tenant.relu(stream, address, address, count)


def test_free_while_in_flight_never_hands_the_memory_to_another_tenant(server):
    count = 2 << 20  # 8 MiB of float32
    size = 4 * count
    with RawTenant(server.address) as attacker, RawTenant(server.address) as victim:
        stream = attacker.create_stream()
        x = attacker.allocate(size)
        attacker.write(stream, x, np.ones(count, np.float32).tobytes())
        # A long chain of work that reads and writes X, then X freed at once, with the chain
        # still queued: relu(X) would zero every negative float a new owner of X stored there.
        for _ in range(64):
            relu_in_place(attacker, stream, x, count)
        assert attacker.free(x).ok
        secret = np.full(count, -7.0, np.float32)
        victim_stream = victim.create_stream()
        v = victim.allocate(size)
        victim.write(victim_stream, v, secret.tobytes())
        assert victim.synchronize(victim_stream).ok
        # The attacker's chain completes without error: it was legal when queued.
        reply = attacker.synchronize(stream, timeout=60)
        assert reply.ok, reply
        data = victim.read(victim_stream, v, size)
        assert victim.synchronize(victim_stream).ok
        np.testing.assert_array_equal(np.frombuffer(data, np.float32), secret)
        # The attacker's later use of X is an error, reported by its stream.
        attacker.write(stream, x, b"\xff" * 256)
        relu_in_place(attacker, stream, x, 64)
        reply = attacker.synchronize(stream)
        assert not reply.ok
        assert reply.code in (INVALID_ARGUMENT, PERMISSION_DENIED), reply
        data = victim.read(victim_stream, v, size)
        np.testing.assert_array_equal(np.frombuffer(data, np.float32), secret)
    assert server.alive(), server.output()
    bystander_round_trip(server.address)


def test_a_freed_allocation_stays_charged_until_its_queued_work_has_run(tmp_path):
    # A device of 16 MiB: the attacker's freed-but-in-use 12 MiB cannot be handed out, so the
    # victim's same-sized allocation fails (device full) while the work is queued, and succeeds,
    # scrubbed, once it has run. Which of the two a given moment sees depends on timing; the
    # victim never sees the attacker's bytes either way.
    count = 3 << 20
    size = 4 * count
    with ServerProcess(tmp_path, memory_limit="16MiB") as process:
        with RawTenant(process.address) as attacker, RawTenant(process.address) as victim:
            stream = attacker.create_stream()
            x = attacker.allocate(size)
            attacker.write(stream, x, np.full(count, 3.0, np.float32).tobytes())
            for _ in range(32):
                relu_in_place(attacker, stream, x, count)
            assert attacker.free(x).ok
            early = victim.call(ALLOCATE, size=size)
            if early.ok:  # the chain had already run: X was reclaimed and scrubbed
                assert early.value == x
            else:
                assert early.code == RESOURCE_EXHAUSTED, early
            assert attacker.synchronize(stream, timeout=60).ok
            v = early.value if early.ok else victim.allocate(size)
            assert v == x
            victim_stream = victim.create_stream()
            data = victim.read(victim_stream, v, size)
            assert not np.frombuffer(data, np.uint8).any(), "the attacker's bytes leaked"
        assert process.alive(), process.output()
        bystander_round_trip(process.address)


@pytest.mark.parametrize("size", [1000, 4096, 3 << 20])
def test_a_new_allocation_never_shows_the_previous_tenants_bytes(server, size):
    secret = (np.arange(size, dtype=np.uint32) * 2654435761 % 251 + 1).astype(np.uint8)
    with RawTenant(server.address) as first:
        stream = first.create_stream()
        freed, kept = first.allocate(size), first.allocate(size)
        for address in (freed, kept):
            first.write(stream, address, secret.tobytes())
            assert first.read(stream, address, size) == secret.tobytes()
        assert first.synchronize(stream).ok
        assert first.free(freed).ok
        # `kept` is never freed: the server reclaims it when the tenant disconnects.
    wait_for(lambda: server.stats()["devices"][0]["bytes_in_use"] == 0, 30,
             "the server to reclaim the disconnected tenant's memory")
    with RawTenant(server.address) as second:
        stream = second.create_stream()
        blocks = second.allocate(size), second.allocate(size)
        assert blocks == (freed, kept), "the test needs the previous tenant's blocks"
        for block in blocks:
            assert second.read(stream, block, size) == bytes(size), "stale bytes"
            reply = second.read_now(block, size)
            assert reply.ok and reply.data == bytes(size), "stale bytes"
        assert second.synchronize(stream).ok
    assert server.alive(), server.output()
    bystander_round_trip(server.address)


def test_zero_byte_and_odd_sized_allocations_are_charged_to_the_quota(tmp_path):
    quota = 64 << 10
    with ServerProcess(tmp_path, memory_limit="1MiB", flags=[f"--client_quota={quota}"]) as process:
        with RawTenant(process.address) as attacker:
            # 5000 zero-byte allocations took 1.25 MB of arena when only their 0 bytes counted.
            replies = pipelined_calls(attacker, ALLOCATE, [{"size": 0}] * 5000)
            granted = sum(reply.ok for reply in replies)
            assert granted == quota // 256
            refused = [reply for reply in replies if not reply.ok]
            assert all(reply.code == RESOURCE_EXHAUSTED for reply in refused)
            assert "--client_quota" in refused[0].message
            # Odd sizes round up to 256 bytes and are charged so.
            with RawTenant(process.address) as odd:
                replies = pipelined_calls(odd, ALLOCATE, [{"size": 257}] * 1000)
                assert sum(reply.ok for reply in replies) == quota // 512
            # The bystander (same quota) still gets its memory and its work done.
            bystander_round_trip(process.address)
            reply = attacker.call(ALLOCATE, size=1)
            assert reply.code == RESOURCE_EXHAUSTED
        assert process.alive(), process.output()


def test_a_stream_flood_is_refused_and_the_server_keeps_serving(server):
    with RawTenant(server.address) as attacker:
        replies = pipelined_calls(attacker, CREATE_STREAM,
                                  [{"stream": i} for i in range(1, 3001)], timeout=60)
        granted = sum(reply.ok for reply in replies)
        assert granted == 256
        refused = [reply for reply in replies if not reply.ok]
        assert {reply.code for reply in refused} == {RESOURCE_EXHAUSTED}
        assert "--max_streams_per_client" in refused[0].message
        # A second attacker connection has its own cap; the server is still fine.
        with RawTenant(server.address) as second:
            replies = pipelined_calls(second, CREATE_STREAM,
                                      [{"stream": i} for i in range(1, 301)], timeout=60)
            assert sum(reply.ok for reply in replies) == 256
        bystander_round_trip(server.address)
        # The attacker's own streams still work.
        address = attacker.allocate(16)
        attacker.write(1, address, struct.pack("<4f", 1, 2, 3, 4))
        assert attacker.read(1, address, 16) == struct.pack("<4f", 1, 2, 3, 4)
    assert server.alive(), server.output()


def test_the_stream_cap_is_a_server_flag(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_streams_per_client=8"]) as process:
        with RawTenant(process.address) as tenant:
            replies = pipelined_calls(tenant, CREATE_STREAM,
                                      [{"stream": i} for i in range(1, 21)])
            assert sum(reply.ok for reply in replies) == 8
            assert "--max_streams_per_client=8" in replies[-1].message
        bystander_round_trip(process.address)
