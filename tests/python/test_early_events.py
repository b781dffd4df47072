"""Early event completion in process (docs/architecture.md, "Events that complete when they are
recorded"): the event after an input copy through TensorFlow's copy path completes when it is
recorded, because the client took the copy's bytes, and TensorFlow goes on while the device may
still run earlier work. The results must be the same bits as when every event waits for its
stream. (A Keras step's batches no longer take that path: the graph optimizer's copy rule copies
them in the step's own kernels, and Keras' per-step has_value makes its bool on the device; eager
copies of host tensors still do.)"""
import json
import subprocess
import sys
import textwrap

from raw_tenant import backend_env

TRAIN_COUNTING = """
    import json
    import numpy as np, keras, tensorflow as tf
    import vgpu
    assert vgpu.is_available(), vgpu.info()
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(96, 10, 10, 3)).astype("float32")
    y = rng.integers(0, 4, size=96).astype("int32")
    model = keras.Sequential([
        keras.Input(shape=(10, 10, 3)),
        keras.layers.Conv2D(6, 3, activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(4),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    per_step = []
    class Count(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.before = vgpu.stats()["events_completed_early"]
        def on_train_batch_end(self, batch, logs=None):
            per_step.append(vgpu.stats()["events_completed_early"] - self.before)
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False,
                        callbacks=[Count()])
    predicted = model.predict(x[:8], verbose=0)
    # Eager copies of host tensors through TensorFlow's copy path, one an iteration.
    copies = []
    for _ in range(5):
        with tf.device("/CPU:0"):
            host = tf.constant(rng.normal(size=(64, 64)).astype("float32"))
        before = vgpu.stats()["events_completed_early"]
        with tf.device("/GPU:0"):
            (tf.identity(host) * 2.0).numpy()
        copies.append(vgpu.stats()["events_completed_early"] - before)
    # An eager copy whose source is overwritten right after: the device keeps what was copied.
    source = rng.normal(size=(256, 256)).astype("float32")
    expected = source.copy()
    with tf.device("/GPU:0"):
        on_device = tf.identity(tf.constant(source))
        source[:] = 0
        doubled = (on_device * 2.0).numpy()
    assert np.array_equal(doubled, expected * 2.0)
    print("RESULT " + json.dumps({"losses": history.history["loss"], "steps": per_step,
                                  "copies": copies, "predicted": predicted.tolist()}))
"""


def _train(early):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(TRAIN_COUNTING)],
                          env=backend_env("inproc", VGPU_LOCAL_EVENTS=early),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1])


def test_input_copies_complete_when_recorded_and_training_gives_the_same_bits():
    early, late = _train("1"), _train("0")
    assert early["losses"] == late["losses"]
    assert early["predicted"] == late["predicted"]
    assert all(n >= 1 for n in early["copies"]), early["copies"]
    assert all(n == 0 for n in late["copies"] + late["steps"]), late
