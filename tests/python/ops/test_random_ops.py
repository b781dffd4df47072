"""StatelessRandomUniformV2 on the virtual GPU produces exactly TensorFlow's CPU numbers (Philox
with TensorFlow's key/counter layout and uint -> float conversions) in every floating dtype, for
odd sizes and counters that carry across words, through tf.random.stateless_uniform and Keras'
Dropout; bad key/counter/alg/shape inputs are TensorFlow's InvalidArgumentError."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_matches_cpu

FLOATING = [tf.float32, tf.float64, tf.float16, tf.bfloat16]
EXACT = dict(rtol=0, atol=0)


def key_and_counter(seed):
    with tf.device("/CPU:0"):
        return tf.raw_ops.StatelessRandomGetKeyCounter(seed=tf.constant(seed, tf.int64))


def uniform(shape, key, counter, dtype, alg=1):
    return tf.raw_ops.StatelessRandomUniformV2(shape=shape, key=key, counter=counter, alg=alg,
                                               dtype=dtype)


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (5, 7), (1000, 37)])
def test_stateless_uniform_is_bit_exact_with_cpu(dtype, shape):
    key, counter = key_and_counter([17, 42])
    assert_matches_cpu(lambda: uniform(shape, key, counter, dtype), expect_launch=0 not in shape,
                       **EXACT)


@pytest.mark.parametrize("counter", [
    [2**64 - 3, 5],                 # the low word carries into the high one
    [2**64 - 1, 2**64 - 1],         # the whole 128-bit counter wraps
    [2**32 - 2, 0],                 # a carry between 32-bit words
])
def test_stateless_uniform_counters_that_carry_match_cpu(counter):
    key = tf.constant([0x0123456789ABCDEF], tf.uint64)
    counter = tf.constant(counter, tf.uint64)
    for dtype in (tf.float32, tf.float64):
        assert_matches_cpu(lambda: uniform([101], key, counter, dtype), **EXACT)


def test_stateless_uniform_auto_select_and_int64_shape_match_cpu():
    key, counter = key_and_counter([1, 2])
    shape = tf.constant([4, 9], tf.int64)
    assert_matches_cpu(lambda: uniform(shape, key, counter, tf.float32, alg=3), **EXACT)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16], ids=lambda d: d.name)
def test_tf_random_stateless_uniform_matches_cpu(dtype):
    def draw():
        return tf.random.stateless_uniform([33, 5], seed=[7, 8], minval=-2, maxval=3,
                                           dtype=dtype)

    with tf.device("/CPU:0"):
        expected = draw()
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        actual = draw()
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_keras_dropout_drops_the_same_units_as_on_cpu():
    import keras

    x = np.ones((16, 64), np.float32)

    def dropped(device):
        with tf.device(device):
            layer = keras.layers.Dropout(0.5, seed=1234)
            return layer(tf.constant(x), training=True).numpy()

    expected = dropped("/CPU:0")
    vgpu.reset_stats()
    actual = dropped("/GPU:0")
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_array_equal(actual, expected)
    assert 0.3 < np.mean(actual == 0) < 0.7


@pytest.mark.parametrize("kwargs,match", [
    (dict(alg=2), "Unsupported algorithm id: 2"),
    (dict(key=tf.constant([1, 2], tf.uint64)), r"key must have shape \[1\]"),
    (dict(counter=tf.constant([1], tf.uint64)), "counter must be a vector with length at least"),
    (dict(shape=[3, -1]), "Dimension -1 must be >= 0"),
])
def test_stateless_uniform_bad_input_is_invalid_argument(kwargs, match):
    key, counter = key_and_counter([3, 4])
    args = dict(shape=[3, 2], key=key, counter=counter, alg=1)
    args.update(kwargs)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.StatelessRandomUniformV2(dtype=tf.float32, **args)
