"""3-D pooling ops (MaxPool3D, AvgPool3D, MaxPool3DGrad, AvgPool3DGrad, MaxPool3DGradGrad) on the
virtual GPU against TensorFlow's CPU kernels: NDHWC in float32 / bfloat16 (float16, which the CPU
does not register, against the CPU's float32), NCDHW through transposes, VALID / SAME, odd sizes,
gradients, ties (the first maximum takes the gradient, as cuDNN), empty tensors, and bad
attributes or shapes failing with TensorFlow's error classes and messages."""
import numpy as np
import pytest
import tensorflow as tf

from ops.op_testing import (
    assert_matches_cpu, pooling_gradient, random_array, run_on, tolerance,
)

BF16 = tf.bfloat16.as_numpy_dtype
DTYPES = [np.float32, np.float16, BF16]
POOLS = {"max": tf.nn.max_pool3d, "avg": tf.nn.avg_pool3d}
# (input shape NDHWC, ksize, strides): odd sizes, overlapping and non-overlapping windows, a
# window as large as the input.
GEOMETRIES = [
    ((2, 5, 6, 7, 3), (2, 3, 2), (1, 2, 2)),
    ((1, 4, 5, 3, 2), (3, 2, 3), (2, 1, 3)),
    ((2, 3, 3, 3, 1), (3, 3, 3), (2, 2, 2)),
]


def to_ncdhw(x):
    return np.transpose(x, (0, 4, 1, 2, 3))


def to_ndhwc(x):
    return np.transpose(x, (0, 2, 3, 4, 1))


def distinct_values(shape, dtype, seed):
    """A permutation of distinct values, exact in every dtype (no ties, no near ties: the CPU's
    MaxPool3DGrad gives the gradient to every element within 1e-5 of the maximum)."""
    count = int(np.prod(shape))
    values = np.random.default_rng(seed).permutation(count).astype(np.float64) - count // 2
    if dtype == BF16:
        assert count <= 256, "bfloat16 holds integers exactly up to 256"
    else:
        values *= 0.5
    return values.reshape(shape).astype(dtype)


def assert_matches_cpu_3d(fn, *args, dtype, **tol):
    """Like assert_matches_cpu; float16 (no CPU kernel) against the CPU's float32 result."""
    if dtype != np.float16:
        return assert_matches_cpu(fn, *args, **tol)
    expected = run_on("/CPU:0", fn, *[a.astype(np.float32) for a in args])
    actual = run_on("/GPU:0", fn, *args)
    for e, a in zip(tf.nest.flatten(expected), tf.nest.flatten(actual)):
        assert a.device.endswith("GPU:0") and a.dtype == tf.float16
        np.testing.assert_allclose(a.numpy().astype(np.float64),
                                   e.numpy().astype(np.float16).astype(np.float64),
                                   **(tol or tolerance(np.float16)))
    return actual


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_pool3d_matches_cpu(mode, dtype, padding, shape, ksize, strides):
    x = random_array(shape, dtype, seed=1)
    exact = dict(rtol=0, atol=0) if mode == "max" or dtype == np.float32 else {}
    assert_matches_cpu_3d(lambda t: POOLS[mode](t, ksize, strides, padding), x, dtype=dtype,
                          **exact)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pool3d_ncdhw_on_gpu_matches_ndhwc_on_cpu(mode, padding):
    x = random_array((2, 5, 6, 7, 3), np.float32, seed=2)
    expected = run_on("/CPU:0", lambda t: POOLS[mode](t, (2, 3, 2), (1, 2, 2), padding), x)
    actual = run_on("/GPU:0", lambda t: POOLS[mode](t, (2, 3, 2), (1, 2, 2), padding,
                                                    data_format="NCDHW"), to_ncdhw(x))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_allclose(to_ndhwc(actual.numpy()), expected.numpy(), rtol=1e-6, atol=1e-6)


def pool3d_gradient(mode, ksize, strides, padding, data_format="NDHWC"):
    return pooling_gradient(POOLS[mode], ksize, strides, padding, data_format)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_pool3d_gradient_matches_cpu(mode, dtype, padding, shape, ksize, strides):
    if dtype == BF16:
        shape = (1, *shape[1:4], 1) if np.prod(shape) > 256 else shape
    x = distinct_values(shape, dtype, seed=3)
    # Average: TensorFlow's oneDNN CPU kernel divides by the window size where TensorFlow's own
    # kernels (and the virtual GPU) multiply by its reciprocal: 1-ulp differences.
    exact = dict(rtol=0, atol=0) if dtype == np.float32 and mode == "max" else {}
    assert_matches_cpu_3d(pool3d_gradient(mode, ksize, strides, padding), x, dtype=dtype, **exact)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pool3d_gradient_in_ncdhw_matches_ndhwc_on_cpu(mode, padding):
    x = distinct_values((2, 4, 5, 6, 3), np.float32, seed=4)
    expected = run_on("/CPU:0", pool3d_gradient(mode, (2, 3, 2), (2, 1, 2), padding), x)
    actual = run_on("/GPU:0", pool3d_gradient(mode, (2, 3, 2), (2, 1, 2), padding, "NCDHW"),
                    to_ncdhw(x))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_allclose(to_ndhwc(actual.numpy()), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_max_pool3d_gradient_goes_to_the_first_of_tied_maxima():
    # cuDNN (TensorFlow's GPU kernel) routes a window's gradient to one maximum, the first in
    # window order; TensorFlow's CPU kernel would give every tied element the whole gradient.
    x = np.zeros((1, 2, 2, 2, 1), np.float32)
    x[0, 0, 1, 0, 0] = x[0, 1, 0, 1, 0] = x[0, 1, 1, 1, 0] = 3.0
    dx = run_on("/GPU:0", pool3d_gradient("max", (2, 2, 2), (2, 2, 2), "VALID"), x)
    expected = np.zeros_like(x)
    weight = random_array((1, 1, 1, 1, 1), np.float32, seed=99)
    expected[0, 0, 1, 0, 0] = weight.item()
    np.testing.assert_array_equal(dx.numpy(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_max_pool3d_grad_grad_matches_cpu(dtype, padding, shape, ksize, strides):
    # Integer values: windows with several maxima; the first one equal to the output wins.
    x = np.random.default_rng(5).integers(0, 4, size=shape).astype(dtype)
    attrs = dict(ksize=[1, *ksize, 1], strides=[1, *strides, 1], padding=padding)
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool3D(input=t, **attrs),
               x.astype(np.float32)).numpy().astype(dtype)
    g = random_array(shape, dtype, seed=6)
    assert_matches_cpu_3d(
        lambda a, b, c: tf.raw_ops.MaxPool3DGradGrad(orig_input=a, orig_output=b, grad=c,
                                                     **attrs),
        x, y, g, dtype=dtype, rtol=0, atol=0)


def test_max_pool3d_grad_grad_in_ncdhw_matches_ndhwc_on_cpu():
    x = np.random.default_rng(7).integers(0, 4, size=(2, 4, 5, 6, 3)).astype(np.float32)
    ndhwc = dict(ksize=[1, 2, 3, 2, 1], strides=[1, 1, 2, 2, 1], padding="SAME")
    ncdhw = dict(ksize=[1, 1, 2, 3, 2], strides=[1, 1, 1, 2, 2], padding="SAME",
                 data_format="NCDHW")
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool3D(input=t, **ndhwc), x).numpy()
    g = random_array(x.shape, np.float32, seed=8)
    expected = run_on("/CPU:0", lambda a, b, c: tf.raw_ops.MaxPool3DGradGrad(
        orig_input=a, orig_output=b, grad=c, **ndhwc), x, y, g)
    actual = run_on("/GPU:0", lambda a, b, c: tf.raw_ops.MaxPool3DGradGrad(
        orig_input=a, orig_output=b, grad=c, **ncdhw), to_ncdhw(x), to_ncdhw(y), to_ncdhw(g))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(to_ndhwc(actual.numpy()), expected.numpy())


def test_raw_avg_pool3d_grad_matches_cpu():
    dy = random_array((2, 3, 3, 4, 2), np.float32, seed=9)
    attrs = dict(ksize=[1, 2, 3, 2, 1], strides=[1, 2, 2, 2, 1], padding="SAME")
    assert_matches_cpu(
        lambda s, g: tf.raw_ops.AvgPool3DGrad(orig_input_shape=s, grad=g, **attrs),
        np.array([2, 5, 6, 7, 2], np.int32), dy)


def test_pool3d_of_empty_tensors_is_empty():
    x = np.zeros((0, 4, 4, 4, 2), np.float32)
    for mode in sorted(POOLS):
        out = run_on("/GPU:0", lambda t: POOLS[mode](t, 2, 2, "VALID"), x)
        assert out.shape == (0, 2, 2, 2, 2) and out.device.endswith("GPU:0")
        dx = run_on("/GPU:0", pool3d_gradient(mode, 2, 2, "VALID"), x)
        assert dx.shape == x.shape


def test_pool3d_with_a_window_larger_than_the_input_gives_an_empty_output_and_zero_gradient():
    x = random_array((1, 2, 2, 2, 1), np.float32)
    for mode in sorted(POOLS):
        out = run_on("/GPU:0", lambda t: POOLS[mode](t, 3, 1, "VALID"), x)
        assert out.shape == (1, 0, 0, 0, 1)
    dx = run_on("/GPU:0", lambda g: tf.raw_ops.AvgPool3DGrad(
        orig_input_shape=[1, 2, 2, 2, 1], grad=g, ksize=[1, 3, 3, 3, 1],
        strides=[1, 1, 1, 1, 1], padding="VALID"), np.zeros((1, 0, 0, 0, 1), np.float32))
    np.testing.assert_array_equal(dx.numpy(), np.zeros((1, 2, 2, 2, 1), np.float32))


@pytest.mark.parametrize("op", ["MaxPool3D", "AvgPool3D"])
@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (dict(ksize=[1, 2, 2, 0, 1]), tf.errors.InvalidArgumentError,
         "Sliding window ksize field must have non-negative dimensions"),
        (dict(ksize=[1, 2, 2, 2, 1, 1]), tf.errors.InvalidArgumentError,
         "Sliding window ksize field must specify 5 dimensions"),
        (dict(strides=[1, 1, 1, 1, 1, 1]), tf.errors.InvalidArgumentError,
         "Sliding window stride field must specify 5 dimensions"),
        (dict(ksize=[2, 1, 1, 1, 1]), tf.errors.UnimplementedError,
         "Pooling is not yet supported on the batch dimension"),
        (dict(ksize=[1, 1, 1, 1, 2], strides=[1, 1, 1, 1, 2]), tf.errors.UnimplementedError,
         "Pooling is not yet supported on the depth dimension"),
        (dict(input=tf.ones([1, 4, 4, 2])), tf.errors.InvalidArgumentError,
         "tensor_in must be 5-dimensional"),
        (dict(ksize=[1, 6, 1, 1, 1]), tf.errors.InvalidArgumentError,
         "output size would be negative"),
    ],
)
def test_pool3d_with_bad_input_fails_like_tensorflow(op, kwargs, error, message):
    attrs = dict(input=tf.ones([1, 4, 4, 4, 2]), ksize=[1, 2, 2, 2, 1],
                 strides=[1, 1, 1, 1, 1], padding="VALID")
    attrs.update(kwargs)
    with tf.device("/GPU:0"), pytest.raises(error, match=message):
        getattr(tf.raw_ops, op)(**attrs)


def test_max_pool3d_grad_shape_errors_are_invalid_argument_as_in_tensorflow():
    # TensorFlow's 3-D testMaxPoolGradEagerShapeErrors, on the virtual GPU.
    ones = lambda *shape: tf.ones(shape)  # noqa: E731
    attrs = dict(ksize=[1, 1, 1, 1, 1], strides=[1, 1, 1, 1, 1], padding="VALID")
    with tf.device("/GPU:0"):
        for op in (tf.raw_ops.MaxPool3DGrad, tf.raw_ops.MaxPool3DGradGrad):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected orig_output shape to be \[1,1,1,1,1\], but got "
                                     r"\[1,1,1,1,2\]"):
                op(orig_input=ones(1, 1, 1, 1, 1), orig_output=ones(1, 1, 1, 1, 2),
                   grad=ones(1, 1, 1, 1, 1), **attrs)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected grad shape to be \[1,1,1,1,1\], but got "
                                     r"\[1,1,1,1,2\]"):
                op(orig_input=ones(1, 1, 1, 1, 1), orig_output=ones(1, 1, 1, 1, 1),
                   grad=ones(1, 1, 1, 1, 2), **attrs)


def test_max_pool3d_grad_grad_of_empty_tensors_is_invalid_argument():
    x = tf.zeros([0, 2, 2, 2, 1])
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="received empty tensor tensor_in"):
        tf.raw_ops.MaxPool3DGradGrad(orig_input=x, orig_output=tf.zeros([0, 1, 1, 1, 1]),
                                     grad=x, ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1],
                                     padding="VALID")


def test_pool3d_gradients_with_bad_shapes_are_invalid_argument():
    attrs = dict(ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID")
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="1-dimensional and 5 elements"):
            tf.raw_ops.AvgPool3DGrad(orig_input_shape=[1, 4, 4, 1], grad=tf.ones([1, 2, 2, 2, 1]),
                                     **attrs)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Expected grad shape"):
            tf.raw_ops.AvgPool3DGrad(orig_input_shape=[1, 4, 4, 4, 1],
                                     grad=tf.ones([1, 2, 3, 2, 1]), **attrs)
        with pytest.raises(tf.errors.InvalidArgumentError, match="tensor_out must be 5-dim"):
            tf.raw_ops.MaxPool3DGrad(orig_input=tf.ones([1, 4, 4, 4, 1]),
                                     orig_output=tf.ones([1, 2, 2, 2]),
                                     grad=tf.ones([1, 2, 2, 2, 1]), **attrs)
