"""The legacy optimizers' update ops (ResourceApplyGradientDescent / Momentum / Adam) on
virtual-GPU variables against TensorFlow's CPU kernels."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import random_array, tolerance

FLOATING = [np.float32, np.float64, np.float16]


def _run(device, dtype, apply, steps=3):
    with tf.device(device):
        var = tf.Variable(random_array((7, 9), dtype, seed=1))
        slots = [tf.Variable(np.abs(random_array((7, 9), dtype, seed=2 + i))) for i in range(2)]
        for step in range(steps):
            grad = tf.constant(random_array((7, 9), dtype, seed=10 + step))
            apply(var, slots, grad, dtype)
        return [v.read_value() for v in [var] + slots]


def _gradient_descent(var, slots, grad, dtype):
    tf.raw_ops.ResourceApplyGradientDescent(
        var=var.handle, alpha=tf.constant(0.1, dtype), delta=grad)


def _momentum(var, slots, grad, dtype, nesterov=False):
    tf.raw_ops.ResourceApplyMomentum(
        var=var.handle, accum=slots[0].handle, lr=tf.constant(0.05, dtype), grad=grad,
        momentum=tf.constant(0.9, dtype), use_nesterov=nesterov)


def _nesterov(var, slots, grad, dtype):
    _momentum(var, slots, grad, dtype, nesterov=True)


def _adam(var, slots, grad, dtype, nesterov=False):
    c = lambda v: tf.constant(v, dtype)  # noqa: E731
    tf.raw_ops.ResourceApplyAdam(
        var=var.handle, m=slots[0].handle, v=slots[1].handle, beta1_power=c(0.9 ** 2),
        beta2_power=c(0.999 ** 2), lr=c(0.01), beta1=c(0.9), beta2=c(0.999), epsilon=c(1e-3),
        grad=grad, use_nesterov=nesterov)


def _adam_nesterov(var, slots, grad, dtype):
    _adam(var, slots, grad, dtype, nesterov=True)


OPTIMIZERS = {
    "gradient_descent": _gradient_descent,
    "momentum": _momentum,
    "nesterov_momentum": _nesterov,
    "adam": _adam,
    "adam_nesterov": _adam_nesterov,
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", FLOATING)
def test_optimizer_update_matches_cpu(name, dtype):
    expected = _run("/CPU:0", dtype, OPTIMIZERS[name])
    vgpu.reset_stats()
    actual = _run("/GPU:0", dtype, OPTIMIZERS[name])
    assert vgpu.stats()["launches"] >= 3
    for a, e in zip(actual, expected):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy().astype(np.float64), e.numpy().astype(np.float64),
                                   **tolerance(dtype))


def test_apply_with_a_mismatched_gradient_shape_is_invalid_argument():
    with tf.device("/GPU:0"):
        var = tf.Variable(np.zeros((2, 3), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="same shape"):
            tf.raw_ops.ResourceApplyGradientDescent(
                var=var.handle, alpha=tf.constant(0.1), delta=tf.ones((3, 2)))


def test_apply_with_a_non_scalar_learning_rate_is_invalid_argument():
    with tf.device("/GPU:0"):
        var = tf.Variable(np.zeros((2, 3), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="not a scalar"):
            tf.raw_ops.ResourceApplyGradientDescent(
                var=var.handle, alpha=tf.constant([0.1, 0.2]), delta=tf.ones((2, 3)))
