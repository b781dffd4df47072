"""Activation ops (Relu, Relu6, Sigmoid, Tanh, Elu, Selu, Softplus, Softsign, LeakyRelu and their
gradient ops) on the virtual GPU against TensorFlow's CPU kernels, in every floating dtype, with
empty and odd shapes, NaN and extreme inputs, and TensorFlow's errors for mismatched gradient
inputs."""
import functools

import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_gradients_match_cpu, assert_matches_cpu, random_array,
                            run_on, tolerance)

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
SHAPES = [(0,), (1,), (7,), (3, 0, 2), (4, 33), (2, 3, 5, 7)]
ACTIVATIONS = {
    "relu": tf.nn.relu,
    "relu6": tf.nn.relu6,
    "sigmoid": tf.math.sigmoid,
    "tanh": tf.math.tanh,
    "elu": tf.nn.elu,
    "selu": tf.nn.selu,
    "softplus": tf.math.softplus,
    "softsign": tf.nn.softsign,
    "leaky_relu": tf.nn.leaky_relu,
    "leaky_relu_0.01": functools.partial(tf.nn.leaky_relu, alpha=0.01),
    "leaky_relu_1.7": functools.partial(tf.nn.leaky_relu, alpha=1.7),
    "leaky_relu_-0.5": functools.partial(tf.nn.leaky_relu, alpha=-0.5),
}

# Gradient ops called directly: (op, first input name, second input name, second input from x).
GRADIENT_OPS = {
    "ReluGrad": (tf.raw_ops.ReluGrad, "gradients", "features", lambda x: x),
    "Relu6Grad": (tf.raw_ops.Relu6Grad, "gradients", "features", lambda x: x),
    "EluGrad": (tf.raw_ops.EluGrad, "gradients", "outputs", tf.nn.elu),
    "SeluGrad": (tf.raw_ops.SeluGrad, "gradients", "outputs", tf.nn.selu),
    "SoftplusGrad": (tf.raw_ops.SoftplusGrad, "gradients", "features", lambda x: x),
    "SoftsignGrad": (tf.raw_ops.SoftsignGrad, "gradients", "features", lambda x: x),
    "LeakyReluGrad": (functools.partial(tf.raw_ops.LeakyReluGrad, alpha=0.3), "gradients",
                      "features", lambda x: x),
}


def activation_tolerance(name, dtype):
    tol = tolerance(dtype)
    if np.dtype(dtype).itemsize == 2 and name in ("elu", "selu", "softplus"):
        # exp/log1p of 16-bit values: Eigen's vectorised and scalar paths may round apart.
        return dict(rtol=2 * tol["rtol"], atol=2 * tol["atol"])
    return tol


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape", SHAPES)
def test_activation_matches_cpu(name, dtype, shape):
    x = random_array(shape, dtype, seed=len(shape), low=-8, high=8)
    assert_matches_cpu(ACTIVATIONS[name], x, expect_launch=x.size > 0,
                       **activation_tolerance(name, dtype))


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_gradient_matches_cpu(name, dtype):
    x = random_array((5, 17), dtype, seed=3, low=-8, high=8)
    assert_gradients_match_cpu(ACTIVATIONS[name], x)


@pytest.mark.parametrize("name", sorted(GRADIENT_OPS))
@pytest.mark.parametrize("dtype", FLOATING)
def test_activation_gradient_op_matches_cpu(name, dtype):
    op, first, second, make_second = GRADIENT_OPS[name]
    x = random_array((6, 11), dtype, seed=5, low=-6, high=6)
    dy = random_array((6, 11), dtype, seed=6, low=-2, high=2)

    def gradient(dy, x):
        return op(**{first: dy, second: make_second(x)})

    assert_matches_cpu(gradient, dy, x)


@pytest.mark.parametrize("name", ["relu", "relu6", "elu", "selu", "softplus", "softsign",
                                  "leaky_relu", "sigmoid", "tanh"])
def test_activation_of_nan_inf_and_extremes_matches_cpu(name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e30, -1e30,
                  20.0, -20.0, 15.9, -15.9], np.float32)
    assert_matches_cpu(ACTIVATIONS[name], x)


@pytest.mark.parametrize("name", ["relu", "relu6"])
@pytest.mark.parametrize("dtype", FLOATING)
def test_relu_and_relu6_are_bit_identical_to_cpu_in_vector_and_scalar_lanes(name, dtype):
    # NaN, signed zeros, infinities and the clamp bounds at every position of a long odd-length
    # tensor: each lands in a vectorised packet somewhere and in the scalar tail somewhere.
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 6.0, -6.0, 5.99, 6.01,
                         1e-30, -1e-30, 3.0, -3.0], np.float32)
    rng = np.random.default_rng(7)
    x = rng.permutation(np.tile(specials, 75))[:1037].astype(dtype)
    expected = run_on("/CPU:0", ACTIVATIONS[name], x).numpy()
    actual = run_on("/GPU:0", ACTIVATIONS[name], x).numpy()
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    np.testing.assert_array_equal(actual.view(bits), expected.view(bits))


SIXTEEN_BIT = [np.float16, tf.bfloat16.as_numpy_dtype]
RELU_FAMILY_GRADIENTS = {
    "ReluGrad": tf.raw_ops.ReluGrad,
    "Relu6Grad": tf.raw_ops.Relu6Grad,
    "LeakyReluGrad": functools.partial(tf.raw_ops.LeakyReluGrad, alpha=0.3),
}


def _specials_and_values(dtype, size, seed):
    """A long tensor of NaNs, signed zeros, infinities, ReLU6's bounds, the type's extremes and
    random values, shuffled: more than one of the executor's 4096-element runs of 16-bit
    activations, each special in a vector lane somewhere and in a run's tail somewhere."""
    info = np.finfo(dtype)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 6.0, -6.0, 5.99, 6.01,
                         float(info.max), float(info.min), float(info.tiny), -float(info.tiny)],
                        np.float32)
    rng = np.random.default_rng(seed)
    values = np.concatenate([np.tile(specials, 40), rng.uniform(-9, 9, size)]).astype(dtype)
    return rng.permutation(values)[:size]


def _assert_same_bits(actual, expected, any_nan_sign=False):
    """Bit for bit; with any_nan_sign, a NaN matches a NaN of either sign (TensorFlow-CPU's
    bfloat16 products give +NaN in Eigen's vector lanes and the NaN of the result's sign in its
    scalar tails, so the sign of a NaN gradient depends on where it lies)."""
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[actual.dtype.itemsize]
    actual_bits, expected_bits = actual.view(bits).copy(), expected.view(bits).copy()
    if any_nan_sign:
        nan = np.isnan(expected.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(actual.astype(np.float32)), nan)
        actual_bits[nan] = expected_bits[nan] = 0
    np.testing.assert_array_equal(actual_bits, expected_bits)


@pytest.mark.parametrize("name", ["relu", "relu6", "leaky_relu", "leaky_relu_1.7",
                                  "leaky_relu_-0.5"])
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_sixteen_bit_relu_family_is_bit_identical_to_cpu_across_runs(name, dtype):
    """The 16-bit ReLU family computes in float32 run by run and rounds once: the bits
    TensorFlow-CPU's kernels give, on either side of a run's end."""
    x = _specials_and_values(dtype, 9001, seed=11)
    _assert_same_bits(run_on("/GPU:0", ACTIVATIONS[name], x).numpy(),
                      run_on("/CPU:0", ACTIVATIONS[name], x).numpy())


@pytest.mark.parametrize("name", sorted(RELU_FAMILY_GRADIENTS))
@pytest.mark.parametrize("dtype", SIXTEEN_BIT)
def test_sixteen_bit_relu_family_gradients_are_bit_identical_to_cpu_across_runs(name, dtype):
    op = RELU_FAMILY_GRADIENTS[name]
    dy = _specials_and_values(dtype, 9001, seed=12)
    x = _specials_and_values(dtype, 9001, seed=13)
    gradient = lambda dy, x: op(gradients=dy, features=x)
    _assert_same_bits(run_on("/GPU:0", gradient, dy, x).numpy(),
                      run_on("/CPU:0", gradient, dy, x).numpy(), any_nan_sign=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_softplus_thresholds_match_cpu(dtype):
    # Around log(epsilon) + 2 and its negative the kernel switches formula.
    eps = np.finfo(dtype).eps
    t = np.log(eps) + 2
    x = np.array([t - 0.01, t, t + 0.01, -t - 0.01, -t, -t + 0.01], dtype)
    assert_matches_cpu(tf.math.softplus, x)


@pytest.mark.parametrize("name", sorted(GRADIENT_OPS))
def test_activation_grad_with_mismatched_shapes_is_invalid_argument(name):
    op, first, second, _ = GRADIENT_OPS[name]
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="must have the same size and shape"):
        op(**{first: tf.ones([3]), second: tf.ones([4])})


@pytest.mark.parametrize("op", [tf.raw_ops.SigmoidGrad, tf.raw_ops.TanhGrad])
def test_sigmoid_and_tanh_grad_need_equal_element_counts_like_tensorflow(op):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="same number of elements, got 3 and 4"):
        op(y=tf.ones([3]), dy=tf.ones([4]))
    # Same element count, different shapes: TensorFlow computes with y's shape.
    assert_matches_cpu(lambda y, dy: op(y=y, dy=dy), random_array((2, 3), np.float32),
                       random_array((6,), np.float32))


def test_activation_kernels_use_descriptors_created_and_destroyed_per_call():
    x = random_array((10,), np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.nn.relu(x).numpy()
    calls = vgpu.stats()["descriptor_calls"]
    for kind in ("activation", "tensor"):
        assert calls[kind]["create"] == calls[kind]["destroy"] == calls[kind]["set"] >= 1


def test_leaky_relu_alpha_reaches_the_device_per_node():
    # Two nodes with different alphas in one function: each launch carries its own coefficient.
    x = random_array((64,), np.float32, low=-4, high=4)

    @tf.function
    def both(t):
        return tf.nn.leaky_relu(t, alpha=0.1) + tf.nn.leaky_relu(t, alpha=0.9)

    expected = run_on("/CPU:0", both, x)
    actual = run_on("/GPU:0", both, x)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)


def test_relu_of_qint8_runs_on_the_device_like_tensorflows_gpu_kernel():
    """TensorFlow has Relu<qint8> on GPUs only: 4 bytes at a time, so the element count must be
    a multiple of 4 (its CPU build has no kernel at all)."""
    values = np.array([[-50, 7, 23, 0], [-1, -5, 6, 11], [-128, 127, 1, -2]], np.int8)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        result = tf.nn.relu(tf.constant(values, tf.qint8))
    assert result.dtype == tf.qint8
    np.testing.assert_array_equal(np.asarray(result.numpy(), np.int8), np.maximum(values, 0))
    assert vgpu.stats()["launches"] >= 1
    for bad in (np.ones((3, 3), np.int8), np.ones((17,), np.int8)):
        with tf.device("/GPU:0"), pytest.raises(
                tf.errors.InvalidArgumentError,
                match=f"multiple of 4 for Relu<qint8>. Got {bad.size}"):
            tf.nn.relu(tf.constant(bad, tf.qint8))
