"""Unmodified Keras training on the virtual GPU gives the CPU's numbers, and puts every heavy
op on the device: a CNN (Conv2D, BatchNormalization, MaxPooling, Dropout, Dense) and an MLP,
with SGD and Adam, from the same initial weights."""
import numpy as np
import pytest
import tensorflow as tf

import keras
from placement import ops_on, placements, run_child


def _data(seed=0, samples=96):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(samples, 12, 12, 1)).astype("float32")
    y = rng.integers(0, 5, size=samples).astype("int32")
    return x, y


def _cnn():
    return keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(5),
    ])


def _mlp():
    return keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(16, activation="tanh"),
        keras.layers.Dense(5),
    ])


def _train(device, build, optimizer, weights, epochs=2):
    keras.utils.set_random_seed(123)
    x, y = _data()
    with tf.device(device):
        model = build()
        model.set_weights(weights)
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False)
        return history.history["loss"], [w.numpy() for w in model.weights]


@pytest.mark.parametrize("build", [_cnn, _mlp], ids=["cnn", "mlp"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_on_the_virtual_gpu_matches_the_cpu(build, optimizer):
    keras.utils.set_random_seed(7)
    weights = build().get_weights()
    cpu_losses, cpu_weights = _train("/CPU:0", build, optimizer, weights)
    gpu_losses, gpu_weights = _train("/GPU:0", build, optimizer, weights)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for g, c in zip(gpu_weights, cpu_weights):
        np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-4)


# Op types that must never run on the CPU in a training step (bookkeeping on scalars and shapes
# may).
HEAVY_OPS = {
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MatMul", "BiasAdd", "BiasAddGrad",
    "Relu", "ReluGrad", "Tanh", "TanhGrad", "MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad",
    "FusedBatchNormV3", "FusedBatchNormGradV3", "SparseSoftmaxCrossEntropyWithLogits",
    "AssignAddVariableOp", "AssignSubVariableOp", "StatelessRandomUniformV2", "Softmax",
}

PLACEMENT_SCRIPT = """
import keras
from test_keras_training import {build}, _data
keras.utils.set_random_seed(1)
x, y = _data()
model = {build}()
model.compile(optimizer={optimizer!r},
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, epochs=1, batch_size=32, verbose=0)
"""


@pytest.mark.parametrize("build", ["_cnn", "_mlp"])
def test_no_heavy_op_of_a_training_step_runs_on_the_cpu(build):
    run = run_child(PLACEMENT_SCRIPT.format(build=build, optimizer="adam"), timeout=180)
    # Every graph node of the run, the train step's and those around it.
    placed = placements(run.log)
    assert placed, "no placement log found"
    on_cpu = sorted(ops_on(placed, "CPU") & HEAVY_OPS)
    assert not on_cpu, f"heavy ops placed on the CPU: {on_cpu}"
    # Adam's update: the Keras hook's fused step (test_keras_fused_adam.py).
    assert {"MatMul", "_VgpuApplyKerasAdam"} <= ops_on(placed, "GPU")
