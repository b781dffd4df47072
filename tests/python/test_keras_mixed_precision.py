"""Keras training under the "mixed_float16" policy on the virtual GPU: a CNN (Conv2D,
BatchNormalization, MaxPooling2D, Dense, Dropout) with a LossScaleOptimizer trains with every op
of its training step on the device (loss scaling's IsFinite, the dropout's key derivation...)
and follows the CPU's losses; and a SimpleRNN's training step (while loop, TensorList
gradients and their ZerosLike) stays on the device too."""
import numpy as np
import pytest
import tensorflow as tf

import keras
from placement import run_child


def cnn():
    return keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(5, dtype="float32"),
    ])


def simple_rnn():
    return keras.Sequential([keras.Input(shape=(5, 3)), keras.layers.SimpleRNN(4),
                             keras.layers.Dense(2)])


def cnn_data(samples=64):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(samples, 12, 12, 1)).astype("float32")
    y = rng.integers(0, 5, size=samples).astype("int32")
    return x, y


def rnn_data(samples=32):
    rng = np.random.default_rng(1)
    return (rng.normal(size=(samples, 5, 3)).astype("float32"),
            rng.normal(size=(samples, 2)).astype("float32"))


def train_mixed(device, weights):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(4)
        x, y = cnn_data()
        with tf.device(device):
            model = cnn()
            model.set_weights(weights)
            model.compile(optimizer="adam",
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            history = model.fit(x, y, epochs=2, batch_size=32, verbose=0, shuffle=False)
            return history.history["loss"], model
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_mixed_precision_cnn_trains_like_the_cpu():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(9)
        weights = cnn().get_weights()
    finally:
        keras.mixed_precision.set_global_policy("float32")
    cpu_losses, _ = train_mixed("/CPU:0", weights)
    gpu_losses, model = train_mixed("/GPU:0", weights)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.layers[0].compute_dtype == "float16"
    assert np.all(np.isfinite(gpu_losses))
    # float16 convolutions and batch norms round differently from the CPU's kernels.
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=2e-2)


PLACEMENT_SCRIPT = """
import keras
from test_keras_mixed_precision import {build}, {data}
{policy}
keras.utils.set_random_seed(1)
x, y = {data}()
model = {build}()
model.compile(optimizer="adam", loss={loss})
with tf.device("/GPU:0"):
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
"""


@pytest.mark.parametrize("case", ["mixed_precision_cnn", "simple_rnn"])
def test_no_op_of_the_training_step_runs_on_the_cpu(case):
    if case == "mixed_precision_cnn":
        script = PLACEMENT_SCRIPT.format(
            build="cnn", data="cnn_data",
            policy='keras.mixed_precision.set_global_policy("mixed_float16")',
            loss="keras.losses.SparseCategoricalCrossentropy(from_logits=True)")
    else:
        script = PLACEMENT_SCRIPT.format(build="simple_rnn", data="rnn_data", policy="",
                                         loss='"mse"')
    offending = run_child(script, timeout=300).off_device()
    assert not offending, "ops placed on the CPU:\n" + "\n".join(offending)
