"""Disclosure and the metrics process (issue 25, classes 6 and 8), through raw sockets: who may
see which statistics (a tenant-token observer its own tenant only, the operator everything), the
metrics endpoint's bearer token and its localhost default, errors that do not tell one tenant
where another's memory is, the metrics process's vgpu-server child dying with its parent, and
the metrics accept loop backing off when out of file descriptors. Each asserts that the server
is alive and that a bystander's round trip completes (docs/security.md)."""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from raw_tenant import ChildProcess, RawTenant, ServerProcess, bystander_round_trip, connect_socket, wait_for

TOKEN, OPERATOR_TOKEN, METRICS_TOKEN = "tenant-secret", "operator-secret", "scrape-secret"
INVALID_ARGUMENT, NOT_FOUND = 3, 5


def query(address, token="", tenant=""):
    """The statistics an observer presenting `token` and naming `tenant` gets (parsed, and the
    raw text)."""
    from vgpu import _core  # noqa: PLC0415

    text = _core.query_server_stats(address, token, tenant=tenant)
    return json.loads(text), text


def operator_flags(tmp_path):
    path = tmp_path / "operator-token"
    path.write_text(OPERATOR_TOKEN + "\n")
    return [f"--operator_token_file={path}", "--tenant_quota=team-b=64MiB"]


@pytest.fixture
def two_tenants_server(tmp_path):
    """A server with a tenant token and an operator token; team-a and team-b each hold 1 MiB."""
    with ServerProcess(tmp_path, token=TOKEN, flags=operator_flags(tmp_path)) as server:
        with RawTenant(server.address, token=TOKEN, tenant="team-a") as a, \
                RawTenant(server.address, token=TOKEN, tenant="team-b") as b:
            a.allocate(1 << 20)
            b.allocate(1 << 20)
            yield server


def test_an_observer_with_the_tenant_token_sees_only_its_own_tenant(two_tenants_server):
    server = two_tenants_server
    stats, text = query(server.address, TOKEN, tenant="team-a")
    assert stats["view"] == "tenant"
    assert [t["name"] for t in stats["tenants"]] == ["team-a"]
    assert stats["tenants"][0]["bytes_in_use"] == 1 << 20
    assert [c["tenant"] for c in stats["clients"]] == ["team-a"]
    assert all("peer" not in c for c in stats["clients"]), stats["clients"]
    for secret in ("team-b", "uid", "pid"):  # no other tenant, no peer identity
        assert secret not in text, (secret, text)
    # Server-wide aggregates that name nobody stay: the device's memory counts both tenants.
    assert stats["devices"][0]["bytes_in_use"] >= 2 << 20
    assert stats["connections"] >= 3
    # Naming no tenant is the default tenant, which holds nothing here.
    default, text = query(server.address, TOKEN)
    assert [t["name"] for t in default["tenants"]] == [] and default["clients"] == []
    assert "team-a" not in text and "team-b" not in text
    assert server.alive(), server.output()
    bystander_round_trip(server.address, token=TOKEN)


def test_the_operator_token_shows_every_tenant_and_peer(two_tenants_server):
    server = two_tenants_server
    stats, _ = query(server.address, OPERATOR_TOKEN)
    assert stats["view"] == "full"
    assert sorted(t["name"] for t in stats["tenants"]) == ["team-a", "team-b"]
    assert sorted(c["tenant"] for c in stats["clients"]) == ["team-a", "team-b"]
    assert all("uid" in c["peer"] for c in stats["clients"]), stats["clients"]
    # A wrong token is refused, as for a tenant.
    with pytest.raises(RuntimeError, match="token"):
        query(server.address, "not-a-token")
    # The operator token admits a tenant too.
    with RawTenant(server.address, token=OPERATOR_TOKEN) as tenant:
        assert tenant.allocate(4096)
    assert server.alive(), server.output()
    bystander_round_trip(server.address, token=TOKEN)


def test_a_server_without_tokens_shows_everything_to_everyone(tmp_path):
    with ServerProcess(tmp_path) as server:
        with RawTenant(server.address, tenant="team-a") as tenant:
            tenant.allocate(4096)
            stats, _ = query(server.address, tenant="team-b")
        assert stats["view"] == "full"
        assert [t["name"] for t in stats["tenants"]] == ["team-a"]
        assert "uid" in stats["clients"][0]["peer"]
        assert server.alive(), server.output()
        bystander_round_trip(server.address)


def test_an_operator_token_equal_to_the_tenant_token_is_refused_at_start(tmp_path):
    token_file, operator_file = tmp_path / "token", tmp_path / "operator"
    token_file.write_text(TOKEN)
    operator_file.write_text(f"  {TOKEN}\n")
    done = subprocess.run(
        [sys.executable, "-m", "vgpu.server", f"--listen=unix://{tmp_path}/x.sock",
         f"--token_file={token_file}", f"--operator_token_file={operator_file}"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "same token" in done.stderr, done.stderr


def test_errors_for_another_tenants_address_equal_those_for_an_unallocated_one(tmp_path):
    with ServerProcess(tmp_path) as server, RawTenant(server.address) as victim, \
            RawTenant(server.address) as attacker:
        target = victim.allocate(1 << 16)
        stream = attacker.create_stream()

        def probe():
            """What the attacker learns about `target`: synchronous read, queued write (reported
            at the synchronisation), free; codes and messages."""
            read = attacker.read_now(target + 256, 64)
            attacker.write(stream, target + 256, b"\xff" * 64)
            queued = attacker.synchronize(stream)
            freed = attacker.free(target)
            return [(r.code, r.message) for r in (read, queued, freed)]

        inside_another = probe()
        assert victim.free(target).ok  # nothing pinned: the block leaves the arena at once
        unallocated = probe()
        assert inside_another == unallocated
        assert [code for code, _ in unallocated] == [INVALID_ARGUMENT, INVALID_ARGUMENT,
                                                     NOT_FOUND]
        assert all("another" not in message for _, message in inside_another), inside_another
        # About its own memory a client still hears the helpful details.
        own = attacker.allocate(256)
        overrun = attacker.read_now(own, 512)
        assert overrun.code == INVALID_ARGUMENT
        assert "past the end of this client's allocation of 256 bytes" in overrun.message
        assert server.alive(), server.output()
        bystander_round_trip(server.address)


class MetricsServer(ChildProcess):
    """`python -m vgpu.server --metrics_address ...` in a child process: the metrics process
    (this child) and its vgpu-server (a grandchild of the test)."""

    def __init__(self, tmp_path, metrics_address="0", flags=()):
        tag = time.monotonic_ns()
        ready, metrics_ready = tmp_path / f"ready-{tag}", tmp_path / f"metrics-port-{tag}"
        self.log = open(tmp_path / f"metrics-{tag}.log", "w+")
        self.socket_path = tmp_path / f"m-{tag}.sock"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vgpu.server", f"--listen=unix://{self.socket_path}",
             f"--ready_file={ready}", "--memory_limit=128MiB", "--compute_threads=2",
             f"--metrics_address={metrics_address}", f"--metrics_ready_file={metrics_ready}",
             *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: metrics_ready.exists() or self.process.poll() is not None, 60,
                 "the metrics endpoint")
        assert self.process.poll() is None, self.output()
        self.address = ready.read_text()
        self.port = int(metrics_ready.read_text())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def child_pid(self):
        """The vgpu-server process whose parent is the metrics process."""
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if parent_pid(int(entry)) == self.process.pid:
                        return int(entry)
                except OSError:
                    continue
        raise AssertionError("the metrics process has no vgpu-server child")

    def scrape(self, token=None, path="/metrics"):
        """(status, body) of a GET on the endpoint; `token` sent as a bearer token."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()



def proc_stat(pid):
    """The fields of /proc/PID/stat after the command name (field 3, the state, first)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()


def parent_pid(pid):
    return int(proc_stat(pid)[1])


def cpu_seconds(pid):
    """User plus system CPU time of process `pid` so far."""
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def gone(pid):
    """Whether process `pid` has exited (a zombie nobody reaped counts as exited)."""
    try:
        return proc_stat(pid)[0] == "Z"
    except OSError:
        return True


def test_the_metrics_endpoint_requires_its_token_and_binds_localhost(tmp_path):
    token_file, metrics_file = tmp_path / "token", tmp_path / "metrics-token"
    token_file.write_text(TOKEN)
    metrics_file.write_text(METRICS_TOKEN)
    with MetricsServer(tmp_path, "0", [f"--token_file={token_file}",
                                       f"--metrics_token_file={metrics_file}"]) as server, \
            RawTenant(server.address, token=TOKEN, tenant="team-a") as tenant:
        tenant.allocate(4096)
        assert f"metrics at http://127.0.0.1:{server.port}/metrics" in server.output()
        for token in (None, "wrong", METRICS_TOKEN + "x", ""):
            status, body = server.scrape(token)
            assert status == 401, (token, status)
            assert "team-a" not in body
        status, body = server.scrape(METRICS_TOKEN)
        assert status == 200
        # Authenticated: the full view, through the operator token the metrics process made up.
        assert 'vgpu_tenant_bytes_in_use{tenant="team-a"} 4096.0' in body, body
        assert "vgpu_up 1.0" in body
        assert server.scrape(METRICS_TOKEN, "/other")[0] == 404
        assert server.process.poll() is None, server.output()
        bystander_round_trip(server.address, token=TOKEN)


def test_an_unauthenticated_metrics_endpoint_of_a_token_server_names_no_tenant(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    with MetricsServer(tmp_path, "127.0.0.1:0", [f"--token_file={token_file}"]) as server, \
            RawTenant(server.address, token=TOKEN, tenant="team-a") as tenant:
        tenant.allocate(4096)
        status, body = server.scrape()
        assert status == 200
        assert "vgpu_up 1.0" in body  # the metrics process still asks the server (as operator)
        assert "team-a" not in body and "vgpu_tenant_" not in body, body
        assert "vgpu_device_memory_bytes_in_use" in body
        bystander_round_trip(server.address, token=TOKEN)


def test_the_metrics_processs_server_child_dies_with_its_parent(tmp_path):
    server = MetricsServer(tmp_path)
    child = server.child_pid()
    try:
        bystander_round_trip(server.address)
        killed = time.monotonic()
        server.process.kill()  # SIGKILL: no chance to pass anything on
        server.process.wait(10)
        wait_for(lambda: gone(child), 5, "the vgpu-server child to exit")
        elapsed = time.monotonic() - killed
        print(f"vgpu-server child gone {elapsed * 1000:.0f} ms after its parent's SIGKILL")
        with pytest.raises(OSError):  # nobody serves the socket any more
            connect_socket(server.address, timeout=2).close()
    finally:
        server.stop()
        if not gone(child):  # the failure above: leave no orphan behind
            os.kill(child, signal.SIGKILL)


def test_the_metrics_accept_loop_backs_off_when_out_of_file_descriptors(tmp_path):
    with MetricsServer(tmp_path) as server:
        pid = server.process.pid
        assert server.scrape()[0] == 200
        open_fds = len(os.listdir(f"/proc/{pid}/fd"))
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds + 4, limits[1]))
        clients = []
        try:
            for _ in range(40):  # a few are accepted and hold their descriptor, the rest wait
                client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", server.port))
                clients.append(client)
            time.sleep(0.5)  # the endpoint runs out of descriptors
            before, started = cpu_seconds(pid), time.monotonic()
            time.sleep(2.0)  # measuring an interval of CPU time, not waiting for a condition
            share = (cpu_seconds(pid) - before) / (time.monotonic() - started)
            print(f"metrics process out of descriptors: {share * 100:.1f}% of a core")
            assert share < 0.1, f"the accept loop spins: {share * 100:.0f}% of a core"
            assert "cannot accept connections" in server.output()
        finally:
            for client in clients:
                client.close()
        # It recovers, with the lowered limit still in place, once the descriptors are back.
        wait_for(lambda: server.scrape()[0] == 200, 15, "a scrape after the exhaustion")
        threads = int(next(line.split()[1] for line in open(f"/proc/{pid}/status")
                           if line.startswith("Threads:")))
        assert threads < 40, threads
        assert server.process.poll() is None, server.output()
        bystander_round_trip(server.address)


def _scrape_succeeds(server):
    """Whether one scrape returns 200. Until the endpoint has noticed that the idle connections
    closed it may still be at its connection limit and close a new one unanswered
    (RemoteDisconnected, an OSError): not yet, rather than a failure."""
    try:
        return server.scrape()[0] == 200
    except OSError:
        return False


# The start of the child scripts below: imports, and a function that lowers the process's
# descriptor limit and opens descriptors until none is free (returning them and the old limits).
_CHILD_PRELUDE = r"""
import ctypes, os, resource, socket, threading
from prometheus_client import CollectorRegistry
from vgpu.metrics import MetricsHTTPServer

ctypes.CDLL("libgcc_s.so.1")  # a thread's exit loads it: not while no descriptor is free


def exhaust_descriptors():
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1 + 8, limits[1]))
    fillers = []
    try:
        while True:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    return fillers, limits
"""


# Run in a child process, whose descriptor limit it lowers: the metrics endpoint with its
# reserve gone (as when another thread opened a file in the moment it was closed) and exactly one
# descriptor free; prints what two scrapers connecting then get back.
_LOST_RESERVE_SCRIPT = _CHILD_PRELUDE + r"""
server = MetricsHTTPServer("127.0.0.1", 0, CollectorRegistry())
threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
os.close(server._reserve)  # taken by another thread
server._reserve = -1
scrapers = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(2)]
for scraper in scrapers:
    scraper.settimeout(10)
fillers, limits = exhaust_descriptors()
os.close(fillers.pop())  # the one descriptor free


def answer(scraper):
    scraper.connect(("127.0.0.1", server.server_address[1]))
    data = b""
    try:
        scraper.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        while chunk := scraper.recv(4096):
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    return data


answers = [answer(scraper).split(b"\r\n", 1)[0].decode() for scraper in scrapers]
for fd in fillers:
    os.close(fd)
resource.setrlimit(resource.RLIMIT_NOFILE, limits)
server.shutdown()
print(answers)
"""


def test_the_metrics_endpoint_takes_its_reserve_back_before_serving_anyone():
    """The free descriptor goes back to the reserve, not to a scraper: out of descriptors, the
    endpoint closes both waiting scrapers unanswered (before the fix it served the first with
    the reserve's descriptor and then could turn nobody away)."""
    done = subprocess.run([sys.executable, "-c", _LOST_RESERVE_SCRIPT], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['', '']", done.stdout + done.stderr[-2000:]
    assert "cannot accept connections" in done.stderr, done.stderr[-2000:]


# Run in a child process, whose descriptor limit it lowers: the metrics endpoint holding its
# reserve and no descriptor free while 24 scrapers wait in its backlog; prints what each got and
# how many times the accept loop backed off.
_BACKLOG_SCRIPT = _CHILD_PRELUDE + r"""
server = MetricsHTTPServer("127.0.0.1", 0, CollectorRegistry())
back_offs = []
rest = server._back_off
server._back_off = lambda error: (back_offs.append(error.errno), rest(error))
scrapers = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(24)]
for scraper in scrapers:
    scraper.settimeout(10)
fillers, limits = exhaust_descriptors()
for scraper in scrapers:  # all in the backlog before the loop looks
    scraper.connect(("127.0.0.1", server.server_address[1]))
threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
answers = []
for scraper in scrapers:
    try:
        answers.append(scraper.recv(4096).decode())
    except ConnectionResetError:
        answers.append("reset")
    except socket.timeout:
        answers.append("timeout")
for fd in fillers:
    os.close(fd)
resource.setrlimit(resource.RLIMIT_NOFILE, limits)
server.shutdown()
print(answers, len(back_offs))
"""


def test_the_metrics_endpoint_closes_its_whole_backlog_in_one_back_off():
    """Out of descriptors, the waiting scrapers are closed one after another in one round, not
    one per 100 ms rest (24 rests would keep the last scraper waiting 2.4 s)."""
    done = subprocess.run([sys.executable, "-c", _BACKLOG_SCRIPT], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers, back_offs = done.stdout.strip().rsplit(" ", 1)
    assert answers == str([""] * 24), done.stdout + done.stderr[-2000:]
    assert 1 <= int(back_offs) <= 2, done.stdout


def test_the_metrics_endpoint_serves_a_bounded_number_of_connections(tmp_path):
    with MetricsServer(tmp_path, "0", ["--metrics_max_connections=4"]) as server:
        pid = server.process.pid
        idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5)
                for _ in range(30)]  # connect and say nothing
        try:
            time.sleep(0.5)  # let the endpoint take them
            threads = int(next(line.split()[1] for line in open(f"/proc/{pid}/status")
                               if line.startswith("Threads:")))
            print(f"metrics process with 30 idle connections: {threads} threads")
            assert threads < 20, threads  # not one thread per connection
        finally:
            for connection in idle:
                connection.close()
        wait_for(lambda: _scrape_succeeds(server), 15, "a scrape once the idle ones left")
        assert server.process.poll() is None, server.output()
        bystander_round_trip(server.address)


def test_a_request_trickling_in_is_cut_off_at_the_deadline_and_frees_its_slot():
    """The handler's socket timeout bounds each read only: two scrapers sending a header byte
    every 0.2 s held both slots of the endpoint for as long as they kept on, and every real
    scrape was closed unanswered. Now a connection ends `request_timeout_s` after it began."""
    import threading  # noqa: PLC0415

    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from vgpu.metrics import MetricsHTTPServer  # noqa: PLC0415

    server = MetricsHTTPServer("127.0.0.1", 0, CollectorRegistry(), max_connections=2,
                               request_timeout_s=1.0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}/metrics"
    tricklers = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        request = b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 1000
        started = time.monotonic()
        cut_after = [None, None]
        for i in range(len(request)):
            for n, trickler in enumerate(tricklers):
                if cut_after[n] is None:
                    try:
                        trickler.send(request[i:i + 1])
                    except OSError:
                        cut_after[n] = time.monotonic() - started
            if all(cut_after) or time.monotonic() - started > 10:
                break
            time.sleep(0.2)  # the attacker's pace
        assert all(cut_after), f"still open after {time.monotonic() - started:.1f} s"
        assert max(cut_after) < 5, cut_after
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
    finally:
        for trickler in tricklers:
            trickler.close()
        server.shutdown()
        server.server_close()


def test_a_scrape_whose_collection_outlasts_the_request_deadline_is_answered():
    """The deadline ends once the request is read: collecting the answer may take longer (a
    server that does not answer at once). A first version cut such a scrape off too."""
    import threading  # noqa: PLC0415

    from prometheus_client import CollectorRegistry  # noqa: PLC0415
    from prometheus_client.core import GaugeMetricFamily  # noqa: PLC0415

    from vgpu.metrics import MetricsHTTPServer  # noqa: PLC0415

    class SlowCollector:
        def collect(self):
            time.sleep(1.5)  # longer than the endpoint's 1 s request deadline
            yield GaugeMetricFamily("vgpu_slow", "Collected slowly.", value=1)

    registry = CollectorRegistry()
    registry.register(SlowCollector())
    server = MetricsHTTPServer("127.0.0.1", 0, registry, request_timeout_s=1.0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            assert "vgpu_slow 1.0" in response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
