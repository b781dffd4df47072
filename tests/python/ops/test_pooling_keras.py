"""Keras pooling layers (MaxPooling1D/2D/3D, AveragePooling1D/2D/3D, GlobalMax/GlobalAverage
Pooling1D/2D/3D) train on the virtual GPU: model.fit gives the CPU's losses, and TensorFlow's
placement log of the training step shows the pooling ops and their gradients on the GPU and
nothing but host bookkeeping (constants, identities, int32 shape arithmetic) on the CPU."""
import numpy as np
import pytest
import tensorflow as tf

import keras
from placement import ops_on, run_child

SHAPES = {1: (10, 3), 2: (8, 9, 3), 3: (6, 7, 5, 2)}


def pooling_model(rank):
    """Dense, then max and average pooling ('same' and 'valid'), then global max and average
    pooling of both, then Dense."""
    layers = keras.layers
    pools = {
        1: (layers.MaxPooling1D, layers.AveragePooling1D, layers.GlobalMaxPooling1D,
            layers.GlobalAveragePooling1D),
        2: (layers.MaxPooling2D, layers.AveragePooling2D, layers.GlobalMaxPooling2D,
            layers.GlobalAveragePooling2D),
        3: (layers.MaxPooling3D, layers.AveragePooling3D, layers.GlobalMaxPooling3D,
            layers.GlobalAveragePooling3D),
    }[rank]
    max_pool, avg_pool, global_max, global_avg = pools
    inputs = keras.Input(shape=SHAPES[rank])
    hidden = layers.Dense(4)(inputs)
    a = max_pool(pool_size=2, padding="same")(hidden)
    b = avg_pool(pool_size=2)(hidden)
    merged = layers.Concatenate()([global_max()(a), global_avg()(a), global_max()(b),
                                   global_avg()(b)])
    return keras.Model(inputs, layers.Dense(3)(merged))


def data(rank, samples=24):
    rng = np.random.default_rng(rank)
    x = rng.uniform(-1, 1, size=(samples, *SHAPES[rank])).astype("float32")
    return x, rng.integers(0, 3, size=samples).astype("int32")


def train(device, rank, weights):
    x, y = data(rank)
    with tf.device(device):
        model = pooling_model(rank)
        model.set_weights(weights)
        model.compile(optimizer="adam", jit_compile=False,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        history = model.fit(x, y, epochs=2, batch_size=8, verbose=0, shuffle=False)
    return history.history["loss"], model.get_weights()


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_training_pooling_layers_on_the_virtual_gpu_matches_the_cpu(rank):
    keras.utils.set_random_seed(rank)
    weights = pooling_model(rank).get_weights()
    cpu_losses, cpu_weights = train("/CPU:0", rank, weights)
    gpu_losses, gpu_weights = train("/GPU:0", rank, weights)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    for g, c in zip(gpu_weights, cpu_weights):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-5)


PLACEMENT_SCRIPT = """
import keras
from ops.test_pooling_keras import pooling_model, data
for rank in (1, 2, 3):
    keras.utils.set_random_seed(rank)
    model = pooling_model(rank)
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data(rank)
    with tf.device("/GPU:0"):
        model.fit(x, y, epochs=1, batch_size=8, verbose=0)
"""

POOLING_OPS = {"MaxPool", "MaxPoolGrad", "AvgPool", "AvgPoolGrad", "MaxPool3D", "MaxPool3DGrad",
               "AvgPool3D", "AvgPool3DGrad", "Max", "Mean"}


def test_training_steps_with_pooling_layers_run_on_the_virtual_gpu():
    run = run_child(PLACEMENT_SCRIPT, timeout=300)
    on_cpu = run.off_device()
    assert not on_cpu, "ops of the training step placed on the CPU:\n" + "\n".join(on_cpu)
    on_gpu = ops_on(run.train_step(), "GPU")
    assert POOLING_OPS <= on_gpu, f"missing on the GPU: {sorted(POOLING_OPS - on_gpu)}"
