"""The stateful random ops (RandomUniform, RandomStandardNormal, TruncatedNormal,
RandomUniformInt: tf.random.uniform / normal / truncated_normal in user code) on the virtual GPU
draw exactly TensorFlow's CPU numbers, call after call, in every dtype; unseeded ops draw
different numbers; bad input is TensorFlow's InvalidArgumentError; and a custom Keras layer that
samples with tf.random.normal trains on the device with soft placement off (before these kernels
the numbers were drawn on the CPU and copied to the device every step)."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import strictly_on_gpu

FLOATING = [tf.float32, tf.float64, tf.float16, tf.bfloat16]
CALLS = 3


def draws_on(device, fn, seed=7):
    """CALLS results of fn() on `device`, after tf.random.set_seed(seed)."""
    tf.random.set_seed(seed)
    with tf.device(device):
        return [fn() for _ in range(CALLS)]


def assert_draws_match_cpu(fn, seed=7):
    expected = draws_on("/CPU:0", fn, seed)
    vgpu.reset_stats()
    actual = draws_on("/GPU:0", fn, seed)
    assert vgpu.stats()["launches"] >= CALLS
    for e, a in zip(tf.nest.flatten(expected), tf.nest.flatten(actual)):
        assert a.device.endswith("GPU:0"), a.device
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a.numpy(), e.numpy())
    return actual


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7), (257, 33)])
def test_uniform_normal_and_truncated_normal_draw_the_cpu_numbers_call_after_call(dtype, shape):
    assert_draws_match_cpu(lambda: tf.random.uniform(shape, dtype=dtype))
    assert_draws_match_cpu(lambda: tf.random.normal(shape, dtype=dtype))
    assert_draws_match_cpu(lambda: tf.random.truncated_normal(shape, dtype=dtype))


@pytest.mark.parametrize("dtype,low,high", [(tf.int32, 3, 17), (tf.int32, -2**31, 2**31 - 1),
                                            (tf.int64, -5, 2**40), (tf.int64, 0, 1)])
def test_uniform_integers_draw_the_cpu_numbers_call_after_call(dtype, low, high):
    assert_draws_match_cpu(lambda: tf.random.uniform([1000], low, high, dtype=dtype))


@pytest.mark.parametrize("seed,seed2", [(1, 0), (0, 1), (2**62 + 5, 2**63 - 1), (-3, -1)])
def test_raw_ops_with_explicit_seeds_draw_the_cpu_numbers(seed, seed2):
    assert_draws_match_cpu(lambda: tf.raw_ops.RandomUniform(
        shape=[6, 5], dtype=tf.float32, seed=seed, seed2=seed2))
    assert_draws_match_cpu(lambda: tf.raw_ops.RandomStandardNormal(
        shape=tf.constant([9], tf.int64), dtype=tf.float64, seed=seed, seed2=seed2))
    assert_draws_match_cpu(lambda: tf.raw_ops.RandomUniformInt(
        shape=[11], minval=tf.constant(-7, tf.int64), maxval=tf.constant(9, tf.int64),
        seed=seed, seed2=seed2))


def test_draws_inside_a_tf_function_match_the_cpu():
    @tf.function
    def draws():
        return (tf.random.normal([4, 3]) * 2.0 + tf.random.uniform([4, 3]),
                tf.random.truncated_normal([7], dtype=tf.float64))

    assert_draws_match_cpu(lambda: draws())


def test_an_empty_draw_reserves_what_the_cpu_reserves():
    # TensorFlow's RandomUniformInt returns before reserving numbers for an empty output; the
    # floating ops reserve 0. Either way the next draw is the CPU's.
    def empty_then_one():
        a = tf.random.uniform([0], 0, 5, dtype=tf.int32, seed=4)
        b = tf.random.uniform([0, 3], seed=5)
        return tf.stack([tf.cast(tf.size(a), tf.float32), tf.cast(tf.size(b), tf.float32)]), \
            tf.random.uniform([6], 0, 5, dtype=tf.int32, seed=4), tf.random.uniform([6], seed=5)

    expected = draws_on("/CPU:0", empty_then_one)
    actual = draws_on("/GPU:0", empty_then_one)
    for e, a in zip(expected, actual):
        for x, y in zip(e, a):
            np.testing.assert_array_equal(y.numpy(), x.numpy())


def test_unseeded_ops_draw_different_numbers_in_range():
    with tf.device("/GPU:0"):
        first = tf.raw_ops.RandomUniform(shape=[1000], dtype=tf.float32, seed=0, seed2=0)
        second = tf.raw_ops.RandomUniform(shape=[1000], dtype=tf.float32, seed=0, seed2=0)
    assert first.device.endswith("GPU:0")
    values = np.concatenate([first.numpy(), second.numpy()])
    assert values.min() >= 0.0 and values.max() < 1.0
    assert not np.array_equal(first.numpy(), second.numpy())
    assert 0.45 < values.mean() < 0.55


@pytest.mark.parametrize("fn,match", [
    (lambda: tf.raw_ops.RandomUniform(shape=[[2]], dtype=tf.float32),
     "shape must be a vector"),
    (lambda: tf.raw_ops.RandomStandardNormal(shape=[2, -1], dtype=tf.float32),
     "Dimension -1 must be >= 0"),
    (lambda: tf.raw_ops.RandomUniformInt(shape=[2], minval=5, maxval=5),
     "Need minval < maxval, got 5 >= 5"),
    (lambda: tf.raw_ops.RandomUniformInt(shape=[2], minval=[0], maxval=5),
     "minval must be 0-D"),
])
def test_bad_input_is_invalid_argument_as_on_the_cpu(fn, match):
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            fn()


class Sampling(keras.layers.Layer):
    """A variational autoencoder's sampling layer, written with tf.random.normal."""

    def call(self, inputs):
        mean, log_var = inputs
        return mean + tf.exp(0.5 * log_var) * tf.random.normal(tf.shape(mean))


def test_a_sampling_layer_with_tf_random_normal_trains_on_the_device():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((8,))
    mean = keras.layers.Dense(4)(inputs)
    log_var = keras.layers.Dense(4)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(8)(Sampling()([mean, log_var])))
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - x))
        return [loss] + tape.gradient(loss, model.trainable_variables)

    tf.random.set_seed(11)
    with tf.device("/CPU:0"):
        expected = step()
    tf.random.set_seed(11)
    actual = strictly_on_gpu(step)
    for e, a in zip(expected, actual):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
