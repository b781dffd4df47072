"""The pool example, examples/multi_worker.py, as the README's "Running a pool" runs it: two
`vgpu server` processes and two TensorFlow workers on localhost, one virtual GPU each, joined by
TF_CONFIG into one tf.distribute.MultiWorkerMirroredStrategy job fed by tf.data. It must train
to the losses of one worker with the whole global batch. Every wait is bounded."""
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import _child_env
from raw_tenant import ServerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multi_worker.py"
FLAGS = ["--epochs=2", "--samples=128", "--global_batch_size=32"]


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _result(path):
    line = path.read_text().strip()
    assert line.startswith("RESULT "), line
    return json.loads(line[len("RESULT "):])


def test_two_workers_on_two_servers_train_as_one_worker_with_the_global_batch(tmp_path):
    servers = [ServerProcess(tmp_path, memory_limit="512MiB") for _ in range(2)]
    try:
        ports = _free_ports(2)
        cluster = {"worker": [f"localhost:{port}" for port in ports]}
        workers, logs = [], []
        for index, server in enumerate(servers):
            config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            log = open(tmp_path / f"worker-{index}.log", "w+")
            logs.append(log)
            workers.append(subprocess.Popen(
                [sys.executable, str(EXAMPLE), *FLAGS,
                 f"--result_file={tmp_path / 'job.result'}"],
                env=_child_env({"TF_CONFIG": config, "VGPU_BACKEND": server.address}),
                stdout=log, stderr=subprocess.STDOUT))
        try:
            codes = [worker.wait(timeout=420) for worker in workers]
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
        for code, log in zip(codes, logs):
            log.seek(0)
            assert code == 0, log.read()[-6000:]
        assert all(server.alive() for server in servers)
    finally:
        for server in servers:
            server.process.terminate()
            server.process.wait(15)
            server.log.close()
        for log in logs:
            log.close()

    job = _result(tmp_path / "job.result")
    assert job["workers"] == 2 and job["replicas"] == 2, job
    assert job["backend"].startswith("unix://") and job["launches"] > 0, job

    alone = subprocess.run(
        [sys.executable, str(EXAMPLE), *FLAGS, f"--result_file={tmp_path / 'alone.result'}"],
        env=_child_env({"VGPU_DEVICE_COUNT": "1"}), capture_output=True, text=True, timeout=420,
        check=False)
    assert alone.returncode == 0, alone.stderr[-6000:]
    reference = _result(tmp_path / "alone.result")
    assert reference["workers"] == 1
    np.testing.assert_allclose(job["loss"], reference["loss"], rtol=1e-4)
    assert job["loss"][-1] < job["loss"][0]  # it learns
