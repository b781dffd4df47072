"""The remote backing executor: a `vgpu server` started by the test on a temporary Unix socket
and on 127.0.0.1 TCP, with TensorFlow processes as clients. Every wait is bounded."""
import json
import socket
import subprocess
import sys
import textwrap

import pytest
from raw_tenant import ALLOCATE, MEMCPY_NOW, RawTenant, ServerProcess, backend_env, wait_for


@pytest.fixture(params=["unix", "tcp"])
def server(request, tmp_path):
    if request.param == "unix":
        listen = f"unix://{tmp_path}/vgpu.sock"
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        listen = f"tcp://127.0.0.1:{port}"
    process = ServerProcess(tmp_path, listen=listen, memory_limit="1GiB")
    yield process
    process.stop()


def _python(code, env, timeout=180, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


TRAIN = """
    import json
    import numpy as np, keras, tensorflow as tf
    import vgpu
    assert vgpu.is_available(), vgpu.info()
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(64, 12, 12, 1)).astype("float32")
    y = rng.integers(0, 5, size=64).astype("int32")
    model = keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(5),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
    print("LOSSES " + json.dumps(history.history["loss"]))
    print("BACKENDS " + json.dumps(vgpu.info()["backends"]))
"""


def _losses(done):
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("LOSSES "))
    return json.loads(line.split(" ", 1)[1])


@pytest.fixture(scope="module")
def inproc_losses():
    return _losses(_python(TRAIN, backend_env("inproc")))


def test_keras_training_through_the_server_matches_in_process(server, inproc_losses):
    done = _python(TRAIN, backend_env(server.address))
    assert server.address in done.stdout
    assert _losses(done) == pytest.approx(inproc_losses, rel=1e-5, abs=1e-6)


STEP_ROUND_TRIPS = TRAIN.replace(
    "    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)\n", """
    per_step = []
    class Count(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.before = vgpu.stats()
        def on_train_batch_end(self, batch, logs=None):
            after = vgpu.stats()
            per_step.append({k: after[k] - self.before[k]
                             for k in ("round_trips", "synchronizations_local",
                                       "events_completed_early")})
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False,
                        callbacks=[Count()])
    print("STEPS " + json.dumps(per_step))
    # Eager copies of host tensors through TensorFlow's copy path (a step's batches are copied
    # by its own kernels), each read back.
    copies = []
    for _ in range(4):
        with tf.device("/CPU:0"):
            host = tf.constant(np.random.default_rng(2).normal(size=(64, 64)).astype("float32"))
        before = vgpu.stats()
        with tf.device("/GPU:0"):
            (tf.identity(host) * 2.0).numpy()
        after = vgpu.stats()
        copies.append({k: after[k] - before[k] for k in ("round_trips", "events_completed_early")})
    print("COPIES " + json.dumps(copies))
""")


def _train_with_and_without(server, switch):
    """Trains through `server` with the environment variable `switch` at "1", then at "0":
    ((losses, per-step counters, per-eager-copy counters) with it on, (...) with it off)."""
    runs = []
    for value in ("1", "0"):
        done = _python(STEP_ROUND_TRIPS, backend_env(server.address, **{switch: value}))
        printed = {}
        for key in ("STEPS", "COPIES"):
            line = next(l for l in done.stdout.splitlines() if l.startswith(key + " "))
            printed[key] = json.loads(line.split(" ", 1)[1])
        runs.append((_losses(done), printed["STEPS"], printed["COPIES"]))
    return runs


def test_keras_steps_through_the_server_synchronise_without_round_trips(server):
    # TensorFlow synchronises the device before each read-back of a step's results; once the
    # notification of the last work came back, the client answers that itself. The results are
    # the same bits either way.
    (losses_local, steps_local, _), (losses_remote, steps_remote, _) = _train_with_and_without(
        server, "VGPU_LOCAL_SYNC")
    assert losses_local == losses_remote
    after_warmup = steps_local[2:]
    assert all(step["round_trips"] == 0 for step in after_warmup), steps_local
    assert all(step["synchronizations_local"] >= 1 for step in after_warmup), steps_local
    assert all(step["round_trips"] >= 1 for step in steps_remote[2:]), steps_remote
    assert all(step["synchronizations_local"] == 0 for step in steps_remote), steps_remote


def test_input_copies_through_the_server_complete_without_waiting_for_it(server):
    # The event after an input copy through TensorFlow's copy path completes when it is
    # recorded (the bytes are already on the wire); the compute stream waits for the copy on
    # the server instead. Training gives the same bits as when every event waits for the server.
    (losses_early, steps_early, copies_early), (losses_late, steps_late, copies_late) = (
        _train_with_and_without(server, "VGPU_LOCAL_EVENTS"))
    assert losses_early == losses_late
    # (The first copy may follow the training's last read-back before its notification is
    # back, and then waits like any recording.)
    assert all(copy["events_completed_early"] >= 1 for copy in copies_early[1:]), copies_early
    assert all(step["round_trips"] == 0 for step in steps_early[2:]), steps_early
    assert all(step["events_completed_early"] == 0 for step in steps_late + copies_late), (
        steps_late, copies_late)


CLIENT_WORK = """
    import numpy as np, tensorflow as tf
    rng = np.random.default_rng({seed})
    a = rng.normal(size=(64, 64)).astype("float32")
    with tf.device("/GPU:0"):
        result = tf.reduce_sum(tf.matmul(a, a) * 2.0).numpy()
    expected = (a.astype("float64") @ a.astype("float64")).sum() * 2.0
    assert abs(result - expected) <= 1e-3 * max(1.0, abs(expected)), (result, expected)
    print("OK", {seed})
"""


def test_four_concurrent_tensorflow_processes_share_one_server(server):
    children = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(CLIENT_WORK.format(seed=i))],
                                 env=backend_env(server.address), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for i in range(4)]
    for i, child in enumerate(children):
        out, err = child.communicate(timeout=240)
        assert child.returncode == 0, err[-3000:]
        assert f"OK {i}" in out


HOLDER = """
    import sys, tensorflow as tf
    with tf.device("/GPU:0"):
        x = tf.ones((1024, 1024, 16))  # 64 MiB on the server
        float(tf.reduce_sum(x))
    print("READY", flush=True)
    line = sys.stdin.readline()
    import time
    start = time.monotonic()
    try:
        with tf.device("/GPU:0"):
            float(tf.reduce_sum(x * 2.0))
        print("NO ERROR", flush=True)
    except Exception as error:  # noqa: BLE001
        print(f"ERROR {time.monotonic() - start:.3f} {type(error).__name__}: {error}",
              flush=True)
"""


def _start_holder(server):
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER)],
                             env=backend_env(server.address), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = child.stdout.readline()  # bounded: the child exits on failure, closing stdout
    assert line.startswith("READY"), child.stderr.read()[-3000:] if child.poll() else line
    return child


def test_killing_a_client_frees_its_memory_on_the_server(server):
    child = _start_holder(server)
    try:
        stats = server.stats()
        assert len(stats["clients"]) == 1
        assert stats["clients"][0]["bytes_in_use"] >= 64 << 20
    finally:
        child.kill()
        child.wait(10)
    wait_for(lambda: server.stats()["devices"][0]["bytes_in_use"] == 0, 5, "memory reclaimed")
    assert "disconnected" in server.output()


def test_killing_the_server_makes_the_next_operation_fail_within_5s(server):
    child = _start_holder(server)
    try:
        server.process.kill()
        server.process.wait(10)
        out, err = child.communicate("go\n", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    line = next((l for l in out.splitlines() if l.startswith(("ERROR", "NO ERROR"))), None)
    assert line is not None and line.startswith("ERROR"), out + err[-3000:]
    elapsed = float(line.split()[1])
    assert elapsed < 5.0
    assert "unreachable" in line or "unreachable" in err


def test_a_wrong_token_is_refused(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ServerProcess(tmp_path, listen=f"tcp://127.0.0.1:{port}", memory_limit="1GiB",
                           token="s3cret")
    try:
        probe = "import vgpu, json; print('INFO ' + json.dumps(vgpu.info()))"
        wrong = _python(probe, backend_env(server.address, VGPU_TOKEN="guess"))
        info = json.loads(next(l for l in wrong.stdout.splitlines() if l.startswith("INFO "))[5:])
        assert info["device_count"] == 0
        assert "token" in info["declined"]
        right = _python(probe, backend_env(server.address, VGPU_TOKEN="s3cret"))
        info = json.loads(next(l for l in right.stdout.splitlines() if l.startswith("INFO "))[5:])
        assert info["device_count"] == 1, right.stderr[-2000:]
    finally:
        server.stop()


def test_a_forged_address_is_refused_and_leaks_nothing(tmp_path):
    server = ServerProcess(tmp_path, memory_limit="1GiB")
    try:
        victim, attacker = RawTenant(server.address), RawTenant(server.address)
        reply = victim.call(ALLOCATE, size=4096)
        assert reply.ok, reply
        secret = reply.value
        reply = attacker.call(MEMCPY_NOW, size=4096, src=secret, wants_host_data=True)
        assert not reply.ok and reply.data == b""
        assert "owned" in reply.message or "not" in reply.message, reply.message
        # Its own allocation works.
        reply = attacker.call(ALLOCATE, size=4096)
        assert reply.ok
        reply = attacker.call(MEMCPY_NOW, size=4096, src=reply.value, wants_host_data=True)
        assert reply.ok and len(reply.data) == 4096
    finally:
        server.stop()


def test_vgpu_stats_shows_clients_and_memory(tmp_path):
    server = ServerProcess(tmp_path, memory_limit="1GiB")
    try:
        client = RawTenant(server.address)
        client.call(ALLOCATE, size=1 << 20)
        done = subprocess.run([sys.executable, "-m", "vgpu", "stats", f"--server={server.address}",
                               "--interval=0.2", "--json"], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stdout)
        assert len(stats["clients"]) == 1
        assert stats["clients"][0]["bytes_in_use"] >= 1 << 20
        assert stats["clients"][0]["staging_bytes"] == 0
        assert "commands_per_s" in stats
    finally:
        server.stop()


FUZZ = """
    import struct, sys, atheris
    from vgpu import _core

    HEADER = struct.Struct("<IHHQII")

    def one_input(data):
        # Half the inputs as raw bytes, half as payloads behind a valid header of some type, so
        # that the payload decoders (commands above all) see the mutations.
        frames = [data]
        if data:
            payload = data[1:]
            frames.append(HEADER.pack(0x55504756, 1, 1 + data[0] % 9, 0, len(payload), 0) + payload)
        for frame in frames:
            try:
                _core.decode_frame(frame)
            except ValueError:
                pass

    atheris.Setup([sys.argv[0], "-runs=30000", "-seed=1", "-max_len=512"], one_input)
    atheris.Fuzz()
"""


def test_fuzzing_the_frame_decoder_finds_no_crash():
    pytest.importorskip("atheris")
    done = _python(FUZZ, backend_env("inproc"), timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
