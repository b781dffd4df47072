"""Activation ops (Relu, Relu6, Sigmoid, Tanh and their gradients) on the virtual GPU against
TensorFlow's CPU kernels, in every floating dtype, with empty and odd shapes."""
import numpy as np
import pytest
import tensorflow as tf

from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
SHAPES = [(0,), (1,), (7,), (3, 0, 2), (4, 33), (2, 3, 5, 7)]
ACTIVATIONS = {
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "sigmoid": tf.math.sigmoid,
    "tanh": tf.math.tanh,
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape", SHAPES)
def test_activation_matches_cpu(name, dtype, shape):
    x = random_array(shape, dtype, seed=len(shape), low=-8, high=8)
    assert_matches_cpu(ACTIVATIONS[name], x, expect_launch=x.size > 0)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_gradient_matches_cpu(name, dtype):
    x = random_array((5, 17), dtype, seed=3, low=-8, high=8)
    assert_gradients_match_cpu(ACTIVATIONS[name], x)


@pytest.mark.parametrize(
    "op", [tf.raw_ops.ReluGrad, tf.raw_ops.Relu6Grad]
)
def test_activation_grad_with_mismatched_shapes_is_invalid_argument(op):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match="same shape"):
        op(gradients=tf.ones([3]), features=tf.ones([4]))


def test_activation_kernels_use_descriptors_created_and_destroyed_per_call():
    import vgpu

    x = random_array((10,), np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.nn.relu(x).numpy()
    calls = vgpu.stats()["descriptor_calls"]
    for kind in ("activation", "tensor"):
        assert calls[kind]["create"] == calls[kind]["destroy"] == calls[kind]["set"] >= 1
