"""A model using every activation Keras offers (keras.activations' ALL_OBJECTS, GELU both exact
and approximate), each as a Dense layer's activation in one functional model, trains on the
virtual GPU from the same weights as on the CPU, and no op of its training step runs on the CPU
except constants, identities and int32 shape bookkeeping (TensorFlow's placement log)."""
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import keras
import vgpu
from placement import run_child, unimplemented

# Ops of other families that the Keras graph of sparsemax's sort gradient uses on int64 shape
# values; tolerated on the CPU only while the plugin has no kernel for them at that dtype.
OTHER_FAMILIES = {"GatherV2", "ScatterNd"}


def activations():
    """(name, function) for every activation Keras offers."""
    from keras.src.activations import ALL_OBJECTS

    found = []
    for fn in ALL_OBJECTS:
        name = fn.__name__
        if name == "gelu":
            found.append(("gelu_exact", lambda x: keras.activations.gelu(x, approximate=False)))
            found.append(("gelu_tanh", lambda x: keras.activations.gelu(x, approximate=True)))
        elif name == "threshold":
            found.append(("threshold",
                          lambda x: keras.activations.threshold(x, threshold=0.1,
                                                                default_value=-0.5)))
        else:
            found.append((name, fn))
    return sorted(found, key=lambda item: item[0])


def build_model():
    """One Dense branch per activation, each reduced to one feature (glu halves its width) as
    the sum of its units plus its first unit (softmax's units alone always sum to 1, which would
    leave its branch without a gradient), then a Dense head."""
    inputs = keras.Input(shape=(8,))
    branches = []
    for name, fn in activations():
        hidden = keras.layers.Dense(4, activation=fn, name=f"dense_{name}")(inputs)
        branches.append(keras.ops.sum(hidden, axis=-1, keepdims=True) + hidden[:, :1])
    outputs = keras.layers.Dense(1, name="head")(keras.layers.Concatenate()(branches))
    return keras.Model(inputs, outputs)


def data(samples=48):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(samples, 8)).astype("float32")
    y = rng.normal(size=(samples, 1)).astype("float32")
    return x, y


def train(device, weights, steps=3):
    """`steps` training steps of one batch each (one per epoch: the losses are per step)."""
    keras.utils.set_random_seed(3)
    x, y = data()
    with tf.device(device):
        model = build_model()
        model.set_weights(weights)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        history = model.fit(x, y, epochs=steps, batch_size=len(x), verbose=0, shuffle=False)
        return history.history["loss"], [w.numpy() for w in model.weights]


def test_every_keras_activation_is_covered():
    from keras.src.activations import ALL_OBJECTS

    names = {name for name, _ in activations()}
    assert len(names) == len(ALL_OBJECTS) + 1  # gelu twice
    assert {"sparsemax", "gelu_exact", "gelu_tanh", "celu", "mish", "glu"} <= names


def test_model_with_every_activation_trains_like_the_cpu():
    keras.utils.set_random_seed(7)
    weights = build_model().get_weights()
    cpu_losses, cpu_weights = train("/CPU:0", weights)
    vgpu.reset_stats()
    gpu_losses, gpu_weights = train("/GPU:0", weights)
    assert vgpu.stats()["launches"] > 100
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4)
    for g, c in zip(gpu_weights, cpu_weights):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-6)


PLACEMENT_SCRIPT = """
import keras
from test_keras_activations import build_model, data
keras.utils.set_random_seed(1)
x, y = data()
model = build_model()
model.compile(optimizer="adam", loss="mse")
with tf.device("/GPU:0"):
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
"""


def test_no_op_of_the_training_step_runs_on_the_cpu():
    offending = run_child(PLACEMENT_SCRIPT, timeout=300).off_device(unimplemented(OTHER_FAMILIES))
    assert not offending, "ops placed on the CPU:\n" + "\n".join(offending)
