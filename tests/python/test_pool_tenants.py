"""Tenants of a shared server and what an operator sees of them: VGPU_TENANT names a client's
connections, `--tenant_quota` caps the memory a tenant's connections hold together, `vgpu
stats --server` (and `--watch`) reports per tenant, and `vgpu server --metrics_address` serves
Prometheus metrics that a real HTTP client scrapes and Prometheus's text parser reads. Raw
wire-format tenants (tests/python/raw_tenant.py) drive the server without TensorFlow."""
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from raw_tenant import ALLOCATE, RawTenant, ServerProcess, bystander_round_trip, wait_for

MiB = 1 << 20


def _tenant(stats, name):
    matches = [t for t in stats["tenants"] if t["name"] == name]
    assert matches, stats["tenants"]
    return matches[0]


def test_a_tenants_connections_share_its_quota_and_others_are_unaffected(tmp_path):
    with ServerProcess(tmp_path, flags=["--tenant_quota=team-a=4MiB,team-b=64MiB"]) as server:
        first = RawTenant(server.address, tenant="team-a")
        second = RawTenant(server.address, tenant="team-a")
        other = RawTenant(server.address, tenant="team-b")
        assert first.quota == 4 * MiB  # the tenant's quota is what the client is told
        first.allocate(3 * MiB)
        refused = second.call(ALLOCATE, size=3 * MiB)  # 6 MiB together is over 4 MiB
        assert not refused.ok and "tenant 'team-a'" in refused.message, refused
        other.allocate(3 * MiB)
        stats = server.stats()
        team_a = _tenant(stats, "team-a")
        assert team_a["connections"] == 2 and team_a["quota_bytes"] == 4 * MiB
        assert team_a["bytes_in_use"] >= 3 * MiB
        assert _tenant(stats, "team-b")["bytes_in_use"] >= 3 * MiB
        first.close()  # its memory returns to the tenant's budget
        wait_for(lambda: _tenant(server.stats(), "team-a")["connections"] == 1, 10, "reclaim")
        second.allocate(3 * MiB)
        second.close()
        other.close()
        assert server.alive()
        bystander_round_trip(server.address)


def test_a_malformed_tenant_name_is_refused_and_the_server_lives_on(tmp_path):
    with ServerProcess(tmp_path) as server:
        for name in ("two words", "x" * 65, "caf\u00e9", ""):
            if name == "":
                RawTenant(server.address, tenant="").close()  # empty: the default tenant
                continue
            with pytest.raises(ConnectionRefusedError, match="tenant name"):
                RawTenant(server.address, tenant=name)
        assert server.alive()
        bystander_round_trip(server.address)


def test_vgpu_tenant_names_a_tensorflow_clients_connections(run_python, tmp_path):
    with ServerProcess(tmp_path) as server:
        result = run_python(
            """
            import tensorflow as tf
            with tf.device("/GPU:0"):
                print(tf.nn.relu(tf.constant([-1.0, 2.0])).numpy().tolist())
            """,
            env={"VGPU_BACKEND": server.address, "VGPU_TENANT": "research.vision"})
        assert result.returncode == 0, result.stderr[-3000:]
        assert "[0.0, 2.0]" in result.stdout
        # The client has gone (the server notices the closed connection on its own thread, a
        # moment later); its work stays counted under its tenant.
        deadline = time.monotonic() + 10
        while (_tenant(server.stats(), "research.vision")["connections"] != 0
               and time.monotonic() < deadline):
            time.sleep(0.05)
        tenant = _tenant(server.stats(), "research.vision")
        assert tenant["connections"] == 0
        assert tenant["launches"] >= 1 and tenant["commands"] > tenant["launches"]
        assert tenant["round_trips"] >= 1
        bad = run_python("import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))",
                         env={"VGPU_BACKEND": server.address, "VGPU_TENANT": "no spaces"})
        assert "VGPU_TENANT" in bad.stdout + bad.stderr


def test_vgpu_stats_watch_refreshes_a_table_of_tenants(tmp_path):
    with ServerProcess(tmp_path, flags=["--tenant_quota=team-a=8MiB"]) as server:
        with RawTenant(server.address, tenant="team-a") as tenant:
            tenant.allocate(MiB)
            done = subprocess.run(
                [sys.executable, "-m", "vgpu", "stats", f"--server={server.address}", "--watch",
                 "--watch_count=2", "--interval=0.2"],
                capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        tables = done.stdout.count(f"vgpu server {server.address}")
        assert tables == 2, done.stdout
        rows = [line.split() for line in done.stdout.splitlines() if line.split()[:1] == ["team-a"]]
        assert len(rows) == 2 and rows[0][1] == "1", done.stdout  # one connection
        assert "8.0 MiB" in done.stdout, done.stdout  # the quota column


def test_invalid_tenant_quotas_are_refused_with_the_reason(tmp_path):
    for value, reason in (("team-a", "name=SIZE"), ("bad name=1GiB", "tenant name"),
                          ("team-a=lots", "tenant_quota"), ("a=1GiB,a=2GiB", "twice")):
        done = subprocess.run(
            [sys.executable, "-m", "vgpu.server", f"--listen=unix://{tmp_path}/x.sock",
             f"--tenant_quota={value}"], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode != 0, value
        assert reason in done.stderr, (value, done.stderr)


@pytest.fixture
def metrics_server(tmp_path):
    ready, metrics_ready = tmp_path / "ready", tmp_path / "metrics-port"
    log = open(tmp_path / "server.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "vgpu.server", f"--listen=unix://{tmp_path}/m.sock",
         f"--ready_file={ready}", "--memory_limit=128MiB", "--compute_threads=2",
         "--tenant_quota=team-a=16MiB", "--metrics_address=127.0.0.1:0",
         f"--metrics_ready_file={metrics_ready}"],
        stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: metrics_ready.exists() or process.poll() is not None, 30, "metrics")
    assert process.poll() is None, log.read()
    yield process, ready.read_text(), int(metrics_ready.read_text())
    if process.poll() is None:
        process.kill()
    process.wait(15)
    log.close()


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_endpoint_serves_per_tenant_and_server_metrics(metrics_server):
    process, address, port = metrics_server
    with RawTenant(address, tenant="team-a") as tenant:
        stream = tenant.create_stream()
        x, y = tenant.allocate(4096), tenant.allocate(4096)
        tenant.write(stream, x, bytes(4096))
        tenant.relu(stream, x, y, 1024)
        assert tenant.synchronize(stream).ok
        samples = _scrape(port)
    team_a = (("tenant", "team-a"),)
    assert samples[("vgpu_up", ())] == 1
    assert samples[("vgpu_tenant_bytes_in_use", team_a)] >= 8192
    assert samples[("vgpu_tenant_quota_bytes", team_a)] == 16 * MiB
    assert samples[("vgpu_tenant_connections", team_a)] == 1
    assert samples[("vgpu_tenant_launches_total", team_a)] >= 1
    assert samples[("vgpu_tenant_commands_total", team_a)] >= 5
    assert samples[("vgpu_tenant_round_trips_total", team_a)] >= 3
    assert samples[("vgpu_tenant_kernel_seconds_total", team_a)] > 0
    assert samples[("vgpu_tenant_errors_total", team_a)] == 0
    assert samples[("vgpu_streams", ())] == 1
    assert samples[("vgpu_device_memory_limit_bytes", (("device", "0"),))] == 128 * MiB
    assert samples[("vgpu_device_memory_bytes_in_use", (("device", "0"),))] >= 8192
    assert samples[("vgpu_commands_total", ())] >= 5
    # Counters never go back when a connection ends.
    wait_for(lambda: _scrape(port)[("vgpu_tenant_connections", team_a)] == 0, 10, "disconnect")
    after = _scrape(port)
    assert after[("vgpu_tenant_launches_total", team_a)] >= samples[
        ("vgpu_tenant_launches_total", team_a)]
    assert after[("vgpu_tenant_bytes_in_use", team_a)] == 0
    process.send_signal(signal.SIGTERM)
    assert process.wait(15) == 0


def test_metrics_report_a_server_that_cannot_be_asked_as_down(metrics_server):
    process, _, port = metrics_server
    children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True,
                              check=False).stdout.split()
    assert children, "vgpu server --metrics_address runs vgpu-server as its child"
    os.kill(int(children[0]), signal.SIGSTOP)  # the server stops answering, the wrapper lives
    try:
        started = time.monotonic()
        assert _scrape(port)[("vgpu_up", ())] == 0
        assert time.monotonic() - started < 10
    finally:
        os.kill(int(children[0]), signal.SIGCONT)
