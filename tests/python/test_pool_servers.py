"""Devices on several servers (issue "a GPU pool", item 4): VGPU_BACKEND names one device per
entry, each on its own `vgpu server`; device-to-device copies between servers are staged
through the client, so tf.distribute.MirroredStrategy over /GPU:0 and /GPU:1 on two servers
trains a Keras CNN to the losses of two in-process devices; a tensor moved between the two
servers arrives intact; device addresses of different servers never alias."""
import json

import numpy as np
import pytest

from raw_tenant import ServerProcess

_MIRRORED = """
import json
import numpy as np
import keras
import tensorflow as tf
import vgpu

keras.utils.set_random_seed(1)
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8, 8, 1)).astype("float32")
y = rng.integers(0, 4, size=64).astype("int32")
strategy = tf.distribute.MirroredStrategy(["/GPU:0", "/GPU:1"])
with strategy.scope():
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.Flatten(),
        keras.layers.Dense(4),
    ])
    model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
weights = [w.tolist() for w in model.get_weights()]
stats = vgpu.stats()
print("RESULT " + json.dumps({
    "loss": history.history["loss"],
    "weights": weights,
    "backends": [d["backend"] for d in stats["devices"]],
    "launches": [d["counters"]["launches"] for d in stats["devices"]],
}))
"""

_MOVE = """
import json
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(5)
values = rng.normal(size=(300, 70)).astype("float32")
with tf.device("/GPU:0"):
    on_first = tf.identity(tf.constant(values)) * 2.0
    # A second allocation on the first server, so that offsets of the two servers coincide.
    other = tf.identity(tf.constant(values)) + 1.0
with tf.device("/GPU:1"):
    moved = tf.identity(on_first)      # copied from the first server to the second
    decoy = tf.identity(tf.constant(-values))
    result = moved + 0.0
with tf.device("/GPU:0"):
    back = tf.identity(result) - 1.0  # and back
print("RESULT " + json.dumps({
    "moved": bool(np.array_equal(result.numpy(), values * 2.0)),
    "back": bool(np.allclose(back.numpy(), values * 2.0 - 1.0)),
    "other": bool(np.array_equal(other.numpy(), values + 1.0)),
    "decoy": bool(np.array_equal(decoy.numpy(), -values)),
    "devices": [result.device, back.device],
}))
"""


def _result(completed):
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-6000:]
    line = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.fixture
def two_servers(tmp_path):
    first = ServerProcess(tmp_path, memory_limit="512MiB")
    second = ServerProcess(tmp_path, memory_limit="512MiB")
    yield first, second
    for server in (first, second):
        server.process.terminate()
        server.process.wait(15)
        server.log.close()


def test_a_tensor_moves_between_two_servers_intact(run_python, two_servers):
    first, second = two_servers
    result = _result(run_python(_MOVE, env={"VGPU_BACKEND": f"{first.address},{second.address}"}))
    assert result["moved"] and result["back"], result
    assert result["other"] and result["decoy"], result  # nothing else was overwritten
    assert result["devices"][0].endswith("GPU:1") and result["devices"][1].endswith("GPU:0")
    assert first.alive() and second.alive()


def test_mirrored_strategy_over_two_servers_trains_as_two_in_process_devices(run_python,
                                                                           two_servers):
    first, second = two_servers
    remote = _result(run_python(_MIRRORED, env={
        "VGPU_BACKEND": f"{first.address},{second.address}"}, timeout=400))
    local = _result(run_python(_MIRRORED, env={"VGPU_DEVICE_COUNT": "2"}, timeout=400))
    assert remote["backends"] == [first.address, second.address] or all(
        "unix://" in b for b in remote["backends"]), remote["backends"]
    # Both servers ran the replicas' work.
    assert all(launches > 0 for launches in remote["launches"]), remote["launches"]
    np.testing.assert_allclose(remote["loss"], local["loss"], rtol=1e-4)
    for got, want in zip(remote["weights"], local["weights"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)
    assert first.alive() and second.alive()
