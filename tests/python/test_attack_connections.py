"""Attacks on `vgpu server`'s connections and buffers through raw sockets (issue 10, findings 5, 6
and 9; issue 25, classes 4, 5 and 9): device-to-host reads never drained, idle connections that
never say Hello (the deadline, and new clients served past a flood of them), too many connections
from one peer, file-descriptor exhaustion, frames that declare 64 MiB and stall or trickle in
to hold the receive budget, token guessing, and frames breaking the sequence rules.
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
    ALLOCATE, COMMAND, CREATE_STREAM, HEADER, HELLO, MAGIC, MEMCPY_DTOH, MEMCPY_HTOD, NOTIFY_KIND,
    REFUSED, REPLY, VERSION, WELCOME, RawTenant, Reply, ServerProcess, bystander_round_trip,
    batch_entries, command_payload, connect_socket, frame, receive_frame, wait_for,
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


def served(server):
    """Whether a bystander's round trip completes now (False while the server still refuses new
    connections: closed ones are noticed and reaped within moments)."""
    try:
        return bystander_round_trip(server.address) is not None
    except ConnectionRefusedError:
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


def test_connections_that_never_say_hello_are_closed_after_the_deadline(tmp_path):
    flags = ["--handshake_timeout=1", "--max_connections=64", "--max_connections_per_peer=1000"]
    with ServerProcess(tmp_path, flags=flags) as server:
        idle = [connect_socket(server.address) for _ in range(32)]
        for sock in idle:  # closed by the handshake deadline
            assert closed_by_server(sock, timeout=20)
            sock.close()
        bystander_round_trip(server.address)
        assert server.alive()
        assert "no hello within --handshake_timeout" in server.output()


def test_idle_handshakes_never_lock_new_clients_out(tmp_path):
    """Issue 25, class 4: connections that never say Hello fill the handshake slots; a new client
    is served at once (the oldest idle handshake makes room), not after the deadline."""
    flags = ["--handshake_timeout=60", "--max_handshakes=8", "--max_connections=64",
             "--max_connections_per_peer=1000"]
    with ServerProcess(tmp_path, flags=flags) as server:
        idle = [connect_socket(server.address) for _ in range(40)]
        time.sleep(0.3)  # let the accept loop take them all
        started = time.monotonic()
        bystander_round_trip(server.address, timeout=10)
        assert time.monotonic() - started < 5
        assert server.stats()["handshakes_evicted"] >= 32
        assert closed_by_server(idle[0], timeout=5)  # the oldest went first
        for sock in idle:
            sock.close()
        assert server.alive()


def tenants_up_to_the_cap(server, cap_flag, cap=4):
    """Connects `cap` tenants, as many as the server's `cap_flag` allows, and checks that one
    more is refused with a message naming the flag; returns the connected ones."""
    tenants = [RawTenant(server.address) for _ in range(cap)]
    with pytest.raises(ConnectionRefusedError, match=cap_flag):
        RawTenant(server.address)
    return tenants


def test_established_tenants_fill_the_connection_cap_with_a_clear_refusal(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_connections=4"]) as server:
        tenants = tenants_up_to_the_cap(server, "--max_connections")
        for tenant in tenants:
            tenant.close()

        wait_for(lambda: served(server), 20, "a free slot")
        assert server.alive()


def test_connections_from_one_peer_are_capped_with_a_clear_refusal(tmp_path):
    with ServerProcess(tmp_path, flags=["--max_connections_per_peer=4"]) as server:
        tenants = tenants_up_to_the_cap(server, "--max_connections_per_peer")
        tenants.pop().close()

        wait_for(lambda: served(server), 20, "a connection once under the per-peer cap")
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


def _copy_and_read_back(tenant, values):
    """Copies `values` to the device through `tenant` in one frame on a new stream, reads them
    back and checks them."""
    stream = tenant.create_stream()
    address = tenant.allocate(values.nbytes)
    tenant.post(MEMCPY_HTOD, stream=stream, dst=address, size=values.nbytes,
                host_data=values.tobytes())
    data = tenant.read(stream, address, values.nbytes)
    np.testing.assert_array_equal(np.frombuffer(data, values.dtype), values)


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
            _copy_and_read_back(
                tenant, np.random.default_rng(0).normal(size=2 * MIB).astype(np.float32))  # 8 MiB
        assert closed_by_server(staller.sock, timeout=20)
        log = server.output()
        assert ("a frame stopped arriving (--frame_timeout)" in log or
                "slower than --min_receive_rate" in log), log[-2000:]
        assert server.alive()


def _drip(sock, stop_after_s, interval_s=0.5):
    """Sends one byte every `interval_s` seconds until the server closes `sock` (returns the
    seconds that took) or `stop_after_s` pass (returns None)."""
    started = time.monotonic()
    while time.monotonic() - started < stop_after_s:
        try:
            sock.send(b"\0")
        except OSError:
            return time.monotonic() - started
        time.sleep(interval_s)  # the attacker's pace, not a synchronisation
    return None


def test_a_frame_trickling_in_is_closed_by_the_minimum_rate(tmp_path):
    """Issue 25, class 4: one byte every half second keeps a frame's "no byte for
    --frame_timeout" clock alive; the minimum rate closes it anyway."""
    flags = ["--frame_timeout=2", "--min_receive_rate=64KiB"]
    with ServerProcess(tmp_path, flags=flags) as server:
        dripper = RawTenant(server.address)
        dripper.send_raw(HEADER.pack(MAGIC, VERSION, COMMAND, 1, 2 * MIB, 0) + b"\0" * 1024)
        closed_after = _drip(dripper.sock, stop_after_s=20)
        assert closed_after is not None and closed_after < 10, closed_after
        wait_for(lambda: "slower than --min_receive_rate" in server.output(), 5,
                 "the reason in the server's log")
        bystander_round_trip(server.address)
        assert server.alive()


def test_a_tenant_trickling_frames_cannot_hold_the_receive_budget_from_others(tmp_path):
    """Issue 25, class 4: large frames on several connections, each fed a byte at a time, hold
    the whole receive budget; another tenant's large copy still goes through promptly."""
    flags = ["--max_receiving_bytes=8MiB", "--frame_timeout=3", "--min_receive_rate=256KiB"]
    with ServerProcess(tmp_path, flags=flags) as server:
        hogs = [RawTenant(server.address) for _ in range(3)]
        for hog in hogs:
            hog.send_raw(HEADER.pack(MAGIC, VERSION, COMMAND, 1, 8 * MIB, 0) + b"\0" * 1024)
        wait_for(lambda: server.stats()["receiving_bytes"] > 0, 20, "the budget reserved")
        import threading  # noqa: PLC0415

        drippers = [threading.Thread(target=_drip, args=(hog.sock, 30)) for hog in hogs]
        for dripper in drippers:
            dripper.start()
        started = time.monotonic()
        with RawTenant(server.address, timeout=60) as tenant:
            # 4 MiB: past the connection's allowance
            _copy_and_read_back(tenant, np.arange(MIB, dtype=np.float32))
        took = time.monotonic() - started
        assert took < 15, f"the bystander's copy waited {took:.1f} s"
        for hog in hogs:
            hog.close()
        for dripper in drippers:
            dripper.join()
        assert server.alive()


def _send_at_rate(sock, stop, bytes_per_second, chunk=32 * 1024):
    """Feeds `sock` zeros at about `bytes_per_second` (just above the server's minimum rate)
    until `stop` is set or the socket fails."""
    sock.settimeout(0.5)
    interval = chunk / bytes_per_second
    while not stop.is_set():
        try:
            sock.send(b"\0" * chunk)
        except TimeoutError:
            pass  # the server is not reading (a reservation it waits for): keep the pace
        except OSError:
            return
        stop.wait(interval)


def test_a_peer_alone_holds_at_most_half_the_receive_budget(tmp_path):
    """A peer whose large frames arrive just above --min_receive_rate, while no other peer
    wants budget, may reserve half of it; another peer's large copy then starts at once instead
    of waiting for the first peer's frames to finish (15 s each here)."""
    other = _non_loopback_ipv4()
    if other is None:
        pytest.skip("needs an address other than loopback, as a second peer")
    import threading  # noqa: PLC0415

    flags = ["--max_receiving_bytes=16MiB", "--frame_timeout=3", "--min_receive_rate=256KiB"]
    with ServerProcess(tmp_path, listen="tcp://0.0.0.0:0", flags=flags) as server:
        port = server.address.rsplit(":", 1)[1]
        stop = threading.Event()
        hogs, feeders = [], []
        try:
            for _ in range(2):  # 6 MiB frames from the loopback peer, ~15 s each
                hog = RawTenant(f"tcp://127.0.0.1:{port}")
                hog.send_raw(HEADER.pack(MAGIC, VERSION, COMMAND, 1, 6 * MIB, 0))
                hogs.append(hog)
                feeders.append(threading.Thread(target=_send_at_rate,
                                                args=(hog.sock, stop, 400 * 1024)))
                feeders[-1].start()
                wait_for(lambda: server.stats()["receiving_bytes"] > 0, 20,
                         "the first frame's reservation")
            time.sleep(0.5)  # the second frame has asked for its reservation (and waits)
            held = server.stats()["receiving_bytes"]
            assert 0 < held <= 8 * MIB, f"one peer holds {held / MIB:.1f} MiB of 16"
            started = time.monotonic()
            with RawTenant(f"tcp://{other}:{port}", timeout=60) as tenant:
                _copy_and_read_back(tenant, np.arange(6 * MIB // 4, dtype=np.float32))  # 6 MiB
            took = time.monotonic() - started
            assert took < 6, f"the other peer's copy waited {took:.1f} s"
        finally:
            stop.set()
            for feeder in feeders:
                feeder.join()
            for hog in hogs:
                hog.close()
        assert server.alive()


def _hello_with_token(address, token, source=None, host=None):
    """Says Hello with `token` (from the `source` IP address over TCP if given, to `host`
    instead of the address's if given); returns the first frame's (type, payload)."""
    if source is not None:
        listen_host, port = address[len("tcp://"):].rsplit(":", 1)
        sock = socket.create_connection((host or listen_host, int(port)), timeout=10,
                                        source_address=(source, 0))
    else:
        sock = connect_socket(address)
    with sock:
        token_bytes = token.encode()
        sock.sendall(frame(HELLO, 0, struct.pack("<HBI", VERSION, 0, len(token_bytes)) +
                           token_bytes))
        kind, _, payload = receive_frame(sock)
        return kind, payload[4:].decode(errors="replace") if kind == REFUSED else payload


def _non_loopback_ipv4():
    """An IPv4 address of this machine that is not a loopback one (None if it has none)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a source address
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_failed_authentications_are_rate_limited_per_peer(tmp_path):
    """Issue 25, class 5: a peer guessing the token gets a few tries, then about one a second,
    refused before its token is compared; another peer is not affected. Every loopback address
    is one peer: a local user cannot take fresh tries from 127.0.0.3, 127.0.0.4, ..."""
    other = _non_loopback_ipv4()
    listen = "tcp://0.0.0.0:0" if other else "tcp://127.0.0.1:0"
    with ServerProcess(tmp_path, listen=listen, token="the-right-token") as server:
        reasons = [_hello_with_token(server.address, f"guess-{i}", source="127.0.0.2",
                                     host="127.0.0.1")[1] for i in range(40)]
        throttled = [r for r in reasons if "too many failed authentications" in r]
        assert len(throttled) >= 25, reasons[:15]
        assert all("token" in r or "too many" in r for r in reasons), reasons
        # Even the right token is refused from the throttled peer for now, from any loopback
        # address...
        for source in ("127.0.0.2", "127.0.0.3", "127.9.9.9"):
            kind, reason = _hello_with_token(server.address, "the-right-token", source=source,
                                             host="127.0.0.1")
            assert kind == REFUSED and "retry in" in reason, (source, reason)
        # ...while another peer authenticates at once (where the machine has another address).
        if other is not None:
            kind, _ = _hello_with_token(server.address, "the-right-token", source=other,
                                        host=other)
            assert kind == WELCOME
        time.sleep(1.5)  # one token refilled: the throttled peer may try again
        kind, _ = _hello_with_token(server.address, "the-right-token", source="127.0.0.2",
                                    host="127.0.0.1")
        assert kind == WELCOME
        assert server.alive()


@pytest.mark.parametrize("kind,sequence", [(COMMAND, 0), (11, 5)])  # 11: CommandBatch
def test_frames_breaking_the_sequence_rules_close_only_that_connection(tmp_path, kind, sequence):
    """Issue 25, class 9: a Command frame's sequence is > 0, a CommandBatch frame's is 0."""
    with ServerProcess(tmp_path) as server:
        tenant = RawTenant(server.address)
        stream = tenant.create_stream()
        payload = command_payload(NOTIFY_KIND, stream=stream, token=9)
        if kind == 11:
            payload = batch_entries((1, payload))
        tenant.send_raw(frame(kind, sequence, payload))
        assert closed_by_server(tenant.sock, timeout=10)
        assert "sequence" in server.output()
        bystander_round_trip(server.address)
        assert server.alive()
