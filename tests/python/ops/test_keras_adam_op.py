"""_VgpuApplyKerasAdam, the plugin's op for Keras' Adam update step (made by the Keras hook,
tests/python/test_keras_fused_adam.py): one update against the formula computed in float32 one
operation at a time, and TensorFlow's errors for malformed updates, with nothing updated."""
import numpy as np
import pytest
import tensorflow as tf

from vgpu import _keras_hook


def test_one_update_follows_keras_formula_operation_by_operation():
    rng = np.random.default_rng(4)
    var0, m0, v0, grad = (rng.normal(size=33).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)
    alpha, c1, c2, eps = (np.float32(x) for x in (0.003, 1 - 0.9, 1 - 0.999, 1e-7))
    with tf.device("/GPU:0"):
        var, m, v = tf.Variable(var0), tf.Variable(m0), tf.Variable(v0)
        _keras_hook.apply_keras_adam(var.handle, m.handle, v.handle, tf.constant(alpha),
                                     tf.constant(c1), tf.constant(c2), tf.constant(eps),
                                     tf.constant(grad))
    m1 = m0 + (grad - m0) * c1
    v1 = v0 + (grad * grad - v0) * c2
    var1 = var0 - (m1 * alpha) / (np.sqrt(v1) + eps)
    np.testing.assert_array_equal(m.numpy(), m1)
    np.testing.assert_array_equal(v.numpy(), v1)
    np.testing.assert_array_equal(var.numpy(), var1)


def test_malformed_updates_are_invalid_arguments():
    with tf.device("/GPU:0"):
        var, m, v = (tf.Variable(tf.ones([4])) for _ in range(3))
        scalar = tf.constant(0.1)

        def apply(grad, alpha=scalar):
            _keras_hook.apply_keras_adam(var.handle, m.handle, v.handle, alpha, scalar, scalar,
                                         scalar, grad)

        with pytest.raises(tf.errors.InvalidArgumentError, match="do not have the same shape"):
            apply(tf.ones([5]))
        with pytest.raises(tf.errors.InvalidArgumentError, match="alpha is not a scalar"):
            apply(tf.ones([4]), alpha=tf.ones([2]))
        # Nothing was updated by the refused calls; a well-formed one updates all three.
        np.testing.assert_array_equal(var.numpy(), np.ones(4, np.float32))
        apply(tf.fill([4], 2.0))
        np.testing.assert_allclose(m.numpy(), 1.1, rtol=1e-6)  # 1 + (2 - 1) * 0.1
        np.testing.assert_allclose(v.numpy(), 1.3, rtol=1e-6)  # 1 + (4 - 1) * 0.1
        assert np.all(var.numpy() < 1.0)
