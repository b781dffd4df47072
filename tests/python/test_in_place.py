"""Element-wise ops compute in place, as on TensorFlow's CPU: inside a function, an op whose
input has no other reader writes its output over that input's buffer (TensorFlow's input
forwarding, counted as `outputs_forwarded` in vgpu.stats()). These tests check that it happens
and that it changes no result: values and gradients equal TensorFlow's CPU kernels', and a
tensor someone else still reads is never overwritten."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import BF16, random_array, tolerance

DTYPES = (np.float32, np.float64, np.float16, BF16)


def _chain(a, b, bias):
    x = a * b                      # a, b are held by the caller: a new buffer
    x = x - tf.constant(0.5, x.dtype)    # a scalar operand
    x = tf.abs(x) + bias           # a broadcast vector operand
    x = tf.sqrt(x)
    x = tf.nn.bias_add(x, bias)
    x = tf.nn.relu(x - tf.constant(1.0, x.dtype))
    x = tf.nn.relu6(x * tf.constant(3.0, x.dtype))
    x = tf.where(a > tf.constant(0.0, a.dtype), x, tf.zeros_like(x))  # SelectV2, as dropout
    return tf.sigmoid(x) * b       # b's buffer is still the caller's: x takes the output


def _run(device, fn, *arrays):
    with tf.device(device):
        return fn(*[tf.constant(a) for a in arrays])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_an_element_wise_chain_runs_in_place_and_matches_cpu(dtype):
    a = random_array((64, 33), dtype, seed=1)
    b = random_array((64, 33), dtype, seed=2, low=0.5, high=2.0)
    bias = random_array((33,), dtype, seed=3, low=0.0, high=1.0)
    chain = tf.function(_chain)
    expected = _run("/CPU:0", chain, a, b, bias)
    _run("/GPU:0", chain, a, b, bias)  # traces the function
    vgpu.reset_stats()
    actual = _run("/GPU:0", chain, a, b, bias)
    assert actual.device.endswith("GPU:0")
    np.testing.assert_allclose(np.asarray(actual.numpy(), np.float64),
                               np.asarray(expected.numpy(), np.float64), **tolerance(dtype))
    # Every op after the first takes over an input's buffer: 12 of the 14 launches (a little
    # slack for Grappler rewriting a few).
    assert vgpu.stats()["outputs_forwarded"] >= 10, vgpu.stats()["outputs_forwarded"]


def test_gradients_computed_in_place_match_cpu():
    x = random_array((32, 17), np.float32, seed=4)
    w = random_array((17,), np.float32, seed=5)

    @tf.function
    def loss_and_gradients(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            h = tf.nn.relu(tf.nn.bias_add(x * tf.constant(2.0), w))
            y = tf.tanh(tf.sigmoid(h) - tf.constant(0.25))
            loss = tf.reduce_sum(y * y)
        return loss, tape.gradient(loss, [x, w])

    expected = _run("/CPU:0", loss_and_gradients, x, w)
    _run("/GPU:0", loss_and_gradients, x, w)
    vgpu.reset_stats()
    actual = _run("/GPU:0", loss_and_gradients, x, w)
    for e, a in zip(tf.nest.flatten(expected), tf.nest.flatten(actual)):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    # ReluGrad, SigmoidGrad, TanhGrad and the element-wise products of the backward pass.
    assert vgpu.stats()["outputs_forwarded"] >= 4, vgpu.stats()["outputs_forwarded"]


def test_a_tensor_with_another_reader_is_never_overwritten():
    a_values = random_array((1000,), np.float32, seed=6)

    @tf.function
    def shared(a):
        y = a * tf.constant(2.0)       # y is read twice below: neither reader may take it over
        first = tf.nn.relu(y - tf.constant(1.0))
        second = tf.sqrt(tf.abs(y)) + y
        return first, second, y

    with tf.device("/GPU:0"):
        a = tf.constant(a_values)
        first, second, y = shared(a)
        np.testing.assert_array_equal(a.numpy(), a_values)  # the caller's input is intact
    doubled = a_values * np.float32(2.0)
    np.testing.assert_array_equal(y.numpy(), doubled)
    np.testing.assert_array_equal(first.numpy(), np.maximum(doubled - np.float32(1.0), 0))
    np.testing.assert_allclose(second.numpy(), np.sqrt(np.abs(doubled)) + doubled, rtol=1e-6)


def test_add_n_sums_into_its_first_input_and_matches_cpu():
    x = random_array((3, 1000), np.float32, seed=7)

    @tf.function
    def summed(x):
        # Eleven terms: TensorFlow's association of a first group, then groups of eight.
        return tf.add_n([x * tf.constant(float(k)) for k in range(1, 12)])

    expected = _run("/CPU:0", summed, x)
    _run("/GPU:0", summed, x)
    vgpu.reset_stats()
    actual = _run("/GPU:0", summed, x)
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())
    # The eleven products write over nothing (x is the caller's); AddN takes the first of them.
    assert vgpu.stats()["outputs_forwarded"] >= 1, vgpu.stats()["outputs_forwarded"]
