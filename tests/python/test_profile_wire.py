"""Profiling through a `vgpu server` (ProfileControl / ProfileRecords, wire_format.h), spoken by a
raw tenant: a started connection gets each copy, memset and launch it sent back with its times on
the server's clock and its kernel's name; only its own commands; nothing once collected; the
records are bounded by the tenant's host budget; and a malformed ProfileControl ends only its own
connection."""
import time

import numpy as np
import pytest

from raw_tenant import (MEMSET, PROFILE_COLLECT, PROFILE_CONTROL, PROFILE_START, RawTenant,
                        ServerProcess, bystander_round_trip, frame, wait_for)


def test_a_profiled_connection_gets_each_command_it_sent_with_times_and_kernel_names(tmp_path):
    count = 4096
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        x, y = tenant.allocate(4 * count), tenant.allocate(4 * count)
        before = time.time_ns()
        _, dropped, records = tenant.profile(PROFILE_START)
        assert (dropped, records) == (0, [])
        write = tenant.write(stream, x, np.linspace(-1, 1, count, dtype=np.float32).tobytes())
        relu = tenant.relu(stream, x, y, count)
        memset = tenant.post(MEMSET, stream=stream, dst=x, size=4 * count, pattern_bytes=1)
        assert tenant.synchronize(stream).ok
        server_now, dropped, records = tenant.profile(PROFILE_COLLECT)
        after = time.time_ns()
        assert dropped == 0
        by_sequence = {record[0]: record for record in records}
        assert set(by_sequence) == {write, relu, memset}, records
        assert by_sequence[relu][3] == "activation_forward"
        assert by_sequence[write][3] is None and by_sequence[memset][3] is None
        # The server's clock is the wall clock (same host here): every time lies in the window.
        assert before <= server_now <= after
        for _, start, end, _ in records:
            assert before <= start <= end <= after
        starts = [by_sequence[s][1] for s in (write, relu, memset)]
        assert starts == sorted(starts), "one stream runs its commands in order"
        # Collected: later commands are not timed, and a second collect is empty.
        tenant.relu(stream, x, y, count)
        assert tenant.synchronize(stream).ok
        assert tenant.profile(PROFILE_COLLECT)[2] == []


def test_a_connection_sees_only_its_own_commands(tmp_path):
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as watcher:
        watcher.profile(PROFILE_START)
        bystander_round_trip(server.address)  # another connection's write, relu and read
        stream = watcher.create_stream()
        mine = watcher.post(MEMSET, stream=stream, dst=watcher.allocate(256), size=256,
                            pattern_bytes=1)
        assert watcher.synchronize(stream).ok
        assert [record[0] for record in watcher.profile(PROFILE_COLLECT)[2]] == [mine]


@pytest.mark.parametrize("payload", [b"", bytes([0]), bytes([3]), bytes([1, 1])])
def test_a_malformed_profile_control_ends_only_its_connection(tmp_path, payload):
    with ServerProcess(tmp_path) as server:
        with RawTenant(server.address) as tenant:
            tenant.send_raw(frame(PROFILE_CONTROL, tenant.next_sequence(), payload))
            wait_for(lambda: tenant.closed, 10, "the server to close the connection")
        bystander_round_trip(server.address)
        assert server.alive()


def test_the_records_a_profile_keeps_are_charged_to_the_tenants_host_budget(tmp_path):
    # 256 KiB of staging budget holds 8192 records of 32 bytes: the rest are dropped, counted.
    # (No launch templates: their budget, an eighth of the staging budget, would take its share.)
    with ServerProcess(tmp_path, flags=["--max_staging_bytes=256KiB",
                                        "--max_template_bytes=0"]) as server, \
            RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        x = tenant.allocate(64)
        tenant.profile(PROFILE_START)
        for _ in range(9000):
            tenant.post(MEMSET, stream=stream, dst=x, size=64, pattern_bytes=1)
        assert tenant.synchronize(stream).ok
        _, dropped, records = tenant.profile(PROFILE_COLLECT)
        assert (len(records), dropped) == (8192, 9000 - 8192)
        # Collected: the charge is given back, and the budget serves a read of all of it again.
        assert tenant.read(stream, x, 64) == bytes(64)
