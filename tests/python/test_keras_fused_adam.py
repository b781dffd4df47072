"""Keras' Adam and AdamW on the virtual GPU through the Keras hook's fused update step
(_VgpuApplyKerasAdam, one launch a variable, the step size once a step): the same weights and
losses as Keras' own update step bit for bit, far fewer launches, Keras' own step wherever the
fused one does not apply (AMSGrad, variables on the CPU, a distribution strategy,
VGPU_FUSED_ADAM=0). The op itself: tests/python/ops/test_keras_adam_op.py."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from vgpu import _keras_hook

keras = pytest.importorskip("keras")

STEPS = 4


def make_optimizer(name):
    return {"adam": lambda: keras.optimizers.Adam(0.01),
            "adamw": lambda: keras.optimizers.AdamW(0.01, weight_decay=0.05),
            "amsgrad": lambda: keras.optimizers.Adam(0.01, amsgrad=True)}[name]()


def dense_model(features):
    return keras.Sequential([keras.Input((features,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.LayerNormalization(), keras.layers.Dense(5)])


def embedding_model(features):
    return keras.Sequential([keras.Input((features,), dtype="int32"),
                             keras.layers.Embedding(50, 8), keras.layers.Flatten(),
                             keras.layers.Dense(5)])


def train(monkeypatch, device, fused, optimizer="adam", build=dense_model, run_eagerly=False,
          integer_inputs=False):
    """Trains a small model two epochs of STEPS batches on `device`; returns its weights, its
    losses and the virtual GPU's launches a step."""
    monkeypatch.setenv("VGPU_FUSED_ADAM", "1" if fused else "0")
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    if integer_inputs:
        x = rng.integers(0, 50, (16 * STEPS, 6)).astype(np.int32)
    else:
        x = rng.random((16 * STEPS, 6)).astype(np.float32)
    y = rng.integers(0, 5, 16 * STEPS)
    with tf.device(device):
        model = build(6)
        model.compile(optimizer=make_optimizer(optimizer), run_eagerly=run_eagerly,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)  # traced here
        before = vgpu.stats()["launches"]
        history = model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        launches = (vgpu.stats()["launches"] - before) / STEPS
    return model.get_weights(), history.history["loss"], launches


def assert_same_bits(weights, expected):
    assert len(weights) == len(expected)
    for w, e in zip(weights, expected):
        np.testing.assert_array_equal(w, e)


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
@pytest.mark.parametrize("run_eagerly", [False, True])
def test_fused_step_gives_keras_own_results_bit_for_bit_in_fewer_launches(
        monkeypatch, optimizer, run_eagerly):
    fused, fused_losses, fused_launches = train(monkeypatch, "/GPU:0", True, optimizer,
                                                run_eagerly=run_eagerly)
    own, own_losses, own_launches = train(monkeypatch, "/GPU:0", False, optimizer,
                                          run_eagerly=run_eagerly)
    cpu, cpu_losses, _ = train(monkeypatch, "/CPU:0", False, optimizer, run_eagerly=run_eagerly)
    assert_same_bits(fused, own)
    assert fused_losses == own_losses
    # Six variables: twelve element-wise launches a variable become one (and, traced, the step
    # size's seven scalar launches are made once a step instead of once a variable).
    assert fused_launches <= own_launches - 6 * 11
    if not run_eagerly:
        assert fused_launches <= own_launches - 6 * 11 - 5 * 7
    for w, c in zip(fused, cpu):
        np.testing.assert_allclose(w, c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused_losses, cpu_losses, rtol=1e-5)


def test_float64_variables_use_the_fused_step(monkeypatch):
    keras.mixed_precision.set_dtype_policy("float64")
    try:
        fused, _, fused_launches = train(monkeypatch, "/GPU:0", True)
        own, _, own_launches = train(monkeypatch, "/GPU:0", False)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert fused[0].dtype == np.float64
    assert_same_bits(fused, own)
    assert fused_launches < own_launches - 6 * 11


def test_mixed_precision_fused_step_equals_keras_own(monkeypatch):
    # The loss-scaling optimizer applies its inner Adam inside a tf.cond on finite gradients.
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        fused, fused_losses, fused_launches = train(monkeypatch, "/GPU:0", True)
        own, own_losses, own_launches = train(monkeypatch, "/GPU:0", False)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert_same_bits(fused, own)
    assert fused_losses == own_losses
    assert fused_launches < own_launches


def test_embedding_gradients_train_the_same(monkeypatch):
    fused, fused_losses, _ = train(monkeypatch, "/GPU:0", True, build=embedding_model,
                                   integer_inputs=True)
    own, own_losses, _ = train(monkeypatch, "/GPU:0", False, build=embedding_model,
                               integer_inputs=True)
    assert_same_bits(fused, own)
    assert fused_losses == own_losses


def test_amsgrad_keeps_keras_own_step(monkeypatch):
    with_hook, _, with_hook_launches = train(monkeypatch, "/GPU:0", True, "amsgrad")
    own, _, own_launches = train(monkeypatch, "/GPU:0", False, "amsgrad")
    assert_same_bits(with_hook, own)
    assert with_hook_launches == own_launches


def test_variables_on_the_cpu_keep_keras_own_step(monkeypatch):
    # The fused op has no CPU kernel: a model placed on the CPU beside a virtual GPU must not
    # get it.
    weights, losses, launches = train(monkeypatch, "/CPU:0", True)
    expected, expected_losses, _ = train(monkeypatch, "/CPU:0", False)
    assert_same_bits(weights, expected)
    assert losses == expected_losses


def test_the_fused_step_applies_only_where_it_can(monkeypatch):
    monkeypatch.setenv("VGPU_FUSED_ADAM", "1")
    adam = keras.optimizers.Adam()
    with tf.device("/GPU:0"):
        on_gpu = tf.Variable(tf.zeros([3]))
        on_gpu_half = tf.Variable(tf.zeros([3], tf.float16))
    with tf.device("/CPU:0"):
        on_cpu = tf.Variable(tf.zeros([3]))
    gradient = tf.ones([3])
    assert _keras_hook.fused_adam_applies(adam, gradient, on_gpu)
    assert not _keras_hook.fused_adam_applies(adam, gradient, on_cpu)
    assert not _keras_hook.fused_adam_applies(adam, tf.ones([3], tf.float16), on_gpu_half)
    sparse = tf.IndexedSlices(tf.ones([1]), tf.constant([0]), tf.constant([3]))
    assert not _keras_hook.fused_adam_applies(adam, sparse, on_gpu)
    assert not _keras_hook.fused_adam_applies(keras.optimizers.Adam(amsgrad=True), gradient,
                                              on_gpu)
    strategy = tf.distribute.OneDeviceStrategy("/GPU:0")
    with strategy.scope():
        assert not _keras_hook.fused_adam_applies(adam, gradient, on_gpu)
    monkeypatch.setenv("VGPU_FUSED_ADAM", "0")
    assert not _keras_hook.fused_adam_applies(adam, gradient, on_gpu)
