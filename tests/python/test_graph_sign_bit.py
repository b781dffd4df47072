"""The graph optimizer's sign-bit rewrite (docs/graph_fusions.md): Keras' float32 signbit,
Less(BitwiseAnd(Bitcast(x, int32), INT32_MIN), 0), whose int32 ops run on the host, becomes
_VgpuSignBit(x) on the virtual GPU. Keras' argmax uses it (every accuracy metric), so without the
rewrite a training step sent its logits to the host and the result back mid-step. The results
must be the host chain's bit for bit: -0.0, negative NaNs and infinities included."""
import numpy as np
import pytest
import tensorflow as tf
import keras

import vgpu

SPECIAL = np.array([-0.0, 0.0, -1.5, 2.0, np.inf, -np.inf, 1e-45, -1e-45, np.nan, -np.nan,
                    np.float32(-3.4e38), 7.0], np.float32)


def sign_bits():
    return vgpu.stats()["graph_fusions"]["sign_bit"]


def keras_signbit_chain(x):
    return tf.less(tf.bitwise.bitwise_and(tf.bitcast(x, tf.int32), tf.constant(tf.int32.min)), 0)


def run_on(device, function, x):
    with tf.device(device):
        return function(tf.identity(tf.constant(x))).numpy()


def test_the_signbit_chain_becomes_one_device_op_with_the_hosts_values():
    function = tf.function(keras_signbit_chain, input_signature=[tf.TensorSpec(None, tf.float32)])
    x = np.concatenate([SPECIAL, -np.copysign(SPECIAL, 1.0)]).reshape(4, 6)
    before = sign_bits()
    vgpu.reset_stats()
    on_gpu = run_on("/GPU:0", function, x)
    assert sign_bits() == before + 1
    assert vgpu.stats()["launches"] >= 1
    on_cpu = run_on("/CPU:0", function, x)
    np.testing.assert_array_equal(on_gpu, on_cpu)
    np.testing.assert_array_equal(on_gpu, np.signbit(x))


def test_keras_argmax_of_negative_zeros_and_nans_matches_cpu_and_copies_nothing_back():
    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32)])
    def positions(x):  # int64 out: an int32 result would be returned in host memory
        return tf.cast(keras.ops.argmax(x * 1.0, axis=-1), tf.int64)

    rng = np.random.default_rng(7)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    x[0] = [-0.0, 0.0, -0.0, -1, -2, -3]      # +0 beats -0
    x[1] = [-0.0, -0.0, -5, -1, -2, -3]       # -0 first, as TensorFlow-CPU
    x[2] = [1, np.nan, 3, 2, 0, 0]
    with tf.device("/GPU:0"):
        on_device = tf.identity(tf.constant(x))
        positions(on_device)  # traced and optimised
        vgpu.reset_stats()
        got = positions(on_device)
        commands = dict(vgpu.stats()["commands"])
    assert commands["memcpy_dtoh"] == 0 and commands["memcpy_htod"] == 0, commands
    with tf.device("/CPU:0"):
        expected = keras.ops.argmax(tf.constant(x), axis=-1).numpy()
    np.testing.assert_array_equal(got.numpy(), expected)


def test_a_chain_whose_intermediate_has_another_reader_keeps_it():
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def both(x):
        bits = tf.bitcast(x, tf.int32)
        masked = tf.bitwise.bitwise_and(bits, tf.constant(tf.int32.min))
        return tf.less(masked, 0), masked

    x = SPECIAL.reshape(3, 4)
    before = sign_bits()
    with tf.device("/GPU:0"):
        sign, masked = both(tf.identity(tf.constant(x)))
    assert sign_bits() == before + 1
    np.testing.assert_array_equal(sign.numpy(), np.signbit(x))
    np.testing.assert_array_equal(masked.numpy(),
                                  (x.view(np.int32) & np.int32(-2**31)).astype(np.int32))


@pytest.mark.parametrize("mask,zero", [(2**31 - 1, 0), (-2**31, 1)])
def test_other_masks_and_bounds_are_left_alone(mask, zero):
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def other(x):
        return tf.less(tf.bitwise.bitwise_and(tf.bitcast(x, tf.int32), tf.constant(mask)), zero)

    x = SPECIAL.reshape(2, 6)
    before = sign_bits()
    on_gpu = run_on("/GPU:0", other, x)
    assert sign_bits() == before
    np.testing.assert_array_equal(on_gpu, run_on("/CPU:0", other, x))


def test_accuracy_metric_training_matches_cpu():
    keras.utils.set_random_seed(3)
    x = np.random.default_rng(3).normal(size=(96, 8)).astype(np.float32)
    y = np.random.default_rng(4).integers(0, 4, 96)

    def train(device):
        keras.utils.set_random_seed(3)
        with tf.device(device):
            model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                                      keras.layers.Dense(4)])
            model.compile(optimizer="sgd", metrics=["accuracy"],
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            history = model.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False)
        return history.history

    on_gpu, on_cpu = train("/GPU:0"), train("/CPU:0")
    np.testing.assert_allclose(on_gpu["loss"], on_cpu["loss"], rtol=1e-5)
    np.testing.assert_array_equal(on_gpu["accuracy"], on_cpu["accuracy"])
