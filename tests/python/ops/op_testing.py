"""Helpers for op parity tests: run the same function on TensorFlow's CPU kernels and on the
virtual GPU, check the result was computed on the GPU, and compare values and gradients."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu

BF16 = tf.bfloat16.as_numpy_dtype


def tolerance_table(float64, float32, float16, bfloat16):
    """Tolerances per floating dtype, as assert_allclose keywords: each argument is the
    (rtol, atol) of its dtype."""
    return {dtype: dict(rtol=rtol, atol=atol)
            for dtype, (rtol, atol) in ((np.float64, float64), (np.float32, float32),
                                        (np.float16, float16), (BF16, bfloat16))}


# Tolerances per dtype for results that may differ by rounding (not by algorithm).
TOLERANCE = tolerance_table(float64=(1e-12, 1e-12), float32=(1e-5, 1e-6), float16=(1e-2, 1e-2),
                            bfloat16=(2e-2, 2e-2))


def tolerance(dtype):
    return TOLERANCE.get(np.dtype(dtype).type, dict(rtol=0, atol=0))


def random_array(shape, dtype, seed=0, low=-3.0, high=3.0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def run_on(device, fn, *args):
    with tf.device(device):
        return fn(*[tf.constant(a) if isinstance(a, np.ndarray) else a for a in args])


def strictly_on_gpu(fn, *args):
    """fn(*args) on GPU:0 with soft placement off: an op without a kernel there fails instead of
    running on the CPU."""
    soft = tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    try:
        return run_on("/GPU:0", fn, *args)
    finally:
        tf.config.set_soft_device_placement(soft)


def assert_computed_on_the_gpus_host_like_cpu(fn, *arrays):
    """fn(*tensors) of tensors made on the host from `arrays`, on GPU:0 under strict placement
    (an op there must run there, as on a GPU): placed on the GPU, equal to the CPU's result bit
    for bit, with nothing launched and nothing copied between host and device (the int32 kernels
    that keep shapes and indices in host memory and compute on the host). Returns the result."""
    with tf.device("/CPU:0"):
        tensors = [tf.constant(a) for a in arrays]
        expected = fn(*tensors)
    vgpu.reset_stats()
    got = strictly_on_gpu(fn, *tensors)
    stats = vgpu.stats()
    assert stats["launches"] == 0
    assert stats["commands"]["memcpy_htod"] == 0 and stats["commands"]["memcpy_dtoh"] == 0
    for want, value in zip(tf.nest.flatten(expected), tf.nest.flatten(got)):
        assert value.device.endswith("GPU:0"), value.device
        assert value.dtype == want.dtype and value.shape == want.shape
        np.testing.assert_array_equal(value.numpy(), want.numpy())
    return got


def assert_matches_cpu(fn, *args, expect_launch=True, **tol):
    """Runs fn(*args) on CPU:0 and GPU:0; checks the GPU result was computed by the plugin
    (at least one launch, when `expect_launch`) and equals the CPU's within tolerance."""
    expected = run_on("/CPU:0", fn, *args)
    vgpu.reset_stats()
    actual = run_on("/GPU:0", fn, *args)
    expected_list = tf.nest.flatten(expected)
    actual_list = tf.nest.flatten(actual)
    for e, a in zip(expected_list, actual_list):
        assert a.device.endswith("GPU:0"), f"result computed on {a.device}"
        assert a.dtype == e.dtype and a.shape == e.shape
        kw = tol or tolerance(e.dtype.as_numpy_dtype)
        np.testing.assert_allclose(
            np.asarray(a.numpy(), dtype=np.float64 if e.dtype.is_floating else None),
            np.asarray(e.numpy(), dtype=np.float64 if e.dtype.is_floating else None), **kw)
    if expect_launch:
        assert vgpu.stats()["launches"] >= 1, "no kernel was launched on the virtual GPU"
    return actual


def gradients_of(fn, seed=99, with_values=False):
    """A function of tensors that returns d(sum(fn(*tensors) * w))/d(tensors) for a fixed random
    upstream gradient w (drawn with `seed`); with `with_values`, a tuple of fn(*tensors) and
    those gradients."""

    def gradients(*tensors):
        with tf.GradientTape() as tape:
            for t in tensors:
                tape.watch(t)
            out = fn(*tensors)
        weights = tf.constant(random_array(out.shape, out.dtype.as_numpy_dtype, seed=seed))
        grads = tape.gradient(out, tensors, output_gradients=weights)
        return (out,) + tuple(grads) if with_values else grads

    return gradients


def pooling_gradient(pool, ksize, strides, padding, data_format):
    """A function of t: the gradient with respect to t of
    pool(t, ksize, strides, padding, data_format=data_format) for a fixed random upstream gradient
    (seed 99) drawn in the channels-last layout, so it is the same whichever the data format (a
    channels-first one, NCHW or NCDHW, gets it transposed)."""

    def gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            out = pool(t, ksize, strides, padding, data_format=data_format)
        channels_first = data_format.startswith("NC")
        shape = np.moveaxis(np.empty(out.shape), 1, -1).shape if channels_first else out.shape
        weights = random_array(shape, out.dtype.as_numpy_dtype, seed=99)
        if channels_first:
            weights = np.moveaxis(weights, -1, 1)
        return tape.gradient(out, t, output_gradients=tf.constant(weights))

    return gradient


def assert_gradients_match_cpu(fn, *args, **tol):
    """Compares d(sum(fn(*args) * w))/d(args) between CPU and GPU for floating inputs, with a
    fixed random upstream gradient w."""
    return assert_matches_cpu(gradients_of(fn), *args, **tol)


# Every dtype the data movement kernels move (they only need the element's size), and the
# tolerance of a result that must be the CPU's bit for bit.
DATA_MOVEMENT_DTYPES = [np.float32, np.float16, BF16, np.float64, np.int32, np.int64, np.bool_,
                        np.uint8]
EXACT = dict(rtol=0, atol=0)


def assert_moves_like_cpu(fn, *args, launches=None):
    """fn(*args) on GPU:0 equals the CPU's bit for bit; with `launches`, exactly that many
    launches ran on the virtual GPU (0: none, and no launch is required)."""
    result = assert_matches_cpu(fn, *args, expect_launch=launches != 0, **EXACT)
    if launches is not None:
        assert vgpu.stats()["launches"] == launches
    return result


def assert_raises_like_cpu(fn, match, x):
    """fn(x) raises InvalidArgumentError matching `match` on the CPU and on GPU:0."""
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            fn(tf.constant(x))
