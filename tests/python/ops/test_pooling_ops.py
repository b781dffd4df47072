"""2-D pooling ops (MaxPool, MaxPoolV2, AvgPool, MaxPoolGrad, MaxPoolGradV2, AvgPoolGrad,
MaxPoolGradGrad, MaxPoolGradGradV2) on the virtual GPU against TensorFlow's CPU kernels: NHWC
parity in every floating dtype, VALID / SAME / EXPLICIT padding, odd sizes, NCHW results checked
through transposes against CPU NHWC, first- and second-order gradients (with TensorFlow's
tie-breaking for max pooling), empty tensors, and invalid attributes, window inputs or shapes
failing with TensorFlow's error classes and messages."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (
    assert_matches_cpu, pooling_gradient, random_array, run_on, tolerance,
)

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
POOLS = {"max": tf.nn.max_pool2d, "avg": tf.nn.avg_pool2d}
# (input shape NHWC, ksize, strides): odd sizes, overlapping and non-overlapping windows,
# windows larger than the stride and a window as large as the input.
GEOMETRIES = [
    ((2, 7, 9, 3), (3, 3), (2, 2)),
    ((1, 6, 5, 4), (2, 3), (1, 2)),
    ((3, 5, 5, 1), (5, 5), (3, 3)),
]


def to_nchw(x):
    return np.transpose(x, (0, 3, 1, 2))


def to_nhwc(x):
    return np.transpose(x, (0, 2, 3, 1))


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_pool_matches_cpu(mode, dtype, padding, shape, ksize, strides):
    x = random_array(shape, dtype, seed=len(shape) + ksize[0])
    assert_matches_cpu(lambda t: POOLS[mode](t, ksize, strides, padding), x)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pool_nchw_on_gpu_matches_nhwc_on_cpu(mode, padding):
    x = random_array((2, 8, 7, 5), np.float32, seed=4)
    expected = run_on("/CPU:0", lambda t: POOLS[mode](t, 3, 2, padding), x)
    actual = run_on(
        "/GPU:0", lambda t: POOLS[mode](t, 3, 2, padding, data_format="NCHW"), to_nchw(x))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_allclose(to_nhwc(actual.numpy()), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_max_pool_is_bit_exact_and_gives_lowest_for_windows_of_minus_infinity():
    x = random_array((2, 9, 9, 6), np.float32, seed=5)
    x[0, :3, :3, :] = -np.inf  # TensorFlow's CPU kernel starts from lowest(), not -inf
    out = assert_matches_cpu(lambda t: tf.nn.max_pool2d(t, 3, 3, "SAME"), x, rtol=0, atol=0)
    assert out.numpy()[0, 0, 0, 0] == np.finfo(np.float32).min


def test_max_pool_with_explicit_padding_matches_cpu():
    x = random_array((2, 6, 7, 3), np.float32, seed=6)

    def pool(t):
        return tf.raw_ops.MaxPool(input=t, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                  padding="EXPLICIT",
                                  explicit_paddings=[0, 0, 1, 2, 2, 1, 0, 0])

    assert_matches_cpu(pool, x, rtol=0, atol=0)


def pool_gradient(mode, ksize, strides, padding, data_format="NHWC"):
    return pooling_gradient(POOLS[mode], ksize, strides, padding, data_format)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_pool_gradient_matches_cpu(mode, dtype, padding, shape, ksize, strides):
    x = random_array(shape, dtype, seed=7)
    assert_matches_cpu(pool_gradient(mode, ksize, strides, padding), x)


def test_max_pool_grad_breaks_ties_like_cpu():
    # Few distinct values: most windows hold several maxima; the first in row-major order wins.
    x = np.random.default_rng(8).integers(0, 3, size=(2, 9, 8, 5)).astype(np.float32)
    assert_matches_cpu(pool_gradient("max", (3, 3), (1, 1), "SAME"), x, rtol=0, atol=0)
    assert_matches_cpu(pool_gradient("max", (2, 2), (2, 2), "VALID"), x, rtol=0, atol=0)


@pytest.mark.parametrize("shape,window", [((2, 8, 6, 70), 2), ((3, 26, 26, 32), 2),
                                          ((1, 9, 9, 3), 3), ((2, 7, 5, 4), 2)])
def test_max_pool_grad_with_tiling_windows_matches_cpu_bit_for_bit(shape, window):
    """Windows that tile the input (stride == window, no padding) write each input's gradient
    once: exactly (8x6, 26x26, 9x9 with 3x3) or with a last row or column in no window (7x5),
    over several channel blocks (70 channels), with ties in most windows."""
    x = np.random.default_rng(13).integers(0, 4, size=shape).astype(np.float32)
    assert_matches_cpu(pool_gradient("max", (window, window), (window, window), "VALID"), x,
                       rtol=0, atol=0)


@pytest.mark.parametrize("mode", sorted(POOLS))
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_pool_gradient_in_nchw_matches_nhwc_on_cpu(mode, padding):
    x = np.random.default_rng(9).integers(0, 4, size=(2, 7, 6, 3)).astype(np.float32)
    expected = run_on("/CPU:0", pool_gradient(mode, (3, 3), (2, 2), padding), x)
    actual = run_on("/GPU:0", pool_gradient(mode, (3, 3), (2, 2), padding, "NCHW"), to_nchw(x))
    np.testing.assert_allclose(to_nhwc(actual.numpy()), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_raw_pool_gradient_ops_match_cpu():
    x = random_array((2, 6, 6, 4), np.float32, seed=10)
    attrs = dict(ksize=[1, 2, 3, 1], strides=[1, 2, 1, 1], padding="SAME")
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool(input=t, **attrs), x).numpy()
    dy = random_array(y.shape, np.float32, seed=11)
    assert_matches_cpu(
        lambda a, b, c: tf.raw_ops.MaxPoolGrad(orig_input=a, orig_output=b, grad=c, **attrs),
        x, y, dy)
    assert_matches_cpu(
        lambda s, g: tf.raw_ops.AvgPoolGrad(orig_input_shape=s, grad=g, **attrs),
        np.array(x.shape, np.int32), dy)


def test_avg_pool_grad_with_a_window_larger_than_the_input_matches_cpu():
    # SAME padding with a window wider than the input: every window is clipped on both sides.
    x = random_array((1, 5, 5, 2), np.float32, seed=12)
    assert_matches_cpu(pool_gradient("avg", (6, 6), (1, 1), "SAME"), x)


def test_pool_of_empty_batch_is_empty():
    x = np.zeros((0, 4, 4, 2), np.float32)
    for mode in sorted(POOLS):
        out = run_on("/GPU:0", lambda t: POOLS[mode](t, 2, 2, "VALID"), x)
        assert out.shape == (0, 2, 2, 2)


def test_pool_with_a_window_larger_than_the_input_gives_an_empty_output_and_zero_gradient():
    x = random_array((1, 2, 2, 1), np.float32)
    for mode in sorted(POOLS):
        out = run_on("/GPU:0", lambda t: POOLS[mode](t, 3, 1, "VALID"), x)
        assert out.shape == (1, 0, 0, 1)
    dx = run_on("/GPU:0", lambda g: tf.raw_ops.AvgPoolGrad(
        orig_input_shape=[1, 2, 2, 1], grad=g, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
        padding="VALID"), np.zeros((1, 0, 0, 1), np.float32))
    np.testing.assert_array_equal(dx.numpy(), np.zeros((1, 2, 2, 1), np.float32))


def run_pool_on_gpu(**kwargs):
    with tf.device("/GPU:0"):
        op = kwargs.pop("op", "MaxPool")
        return getattr(tf.raw_ops, op)(**kwargs).numpy()


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_pool_with_a_window_that_does_not_fit_is_invalid_argument(op):
    key = "input" if op == "MaxPool" else "value"
    with pytest.raises(tf.errors.InvalidArgumentError, match="output size would be negative"):
        run_pool_on_gpu(op=op, **{key: tf.ones([1, 2, 2, 1])}, ksize=[1, 4, 4, 1],
                        strides=[1, 1, 1, 1], padding="VALID")


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (dict(ksize=[1, 0, 2, 1], strides=[1, 1, 1, 1]), tf.errors.InvalidArgumentError,
         "ksize must be positive"),
        (dict(ksize=[1, 2, 2, 1], strides=[1, 0, 1, 1]), tf.errors.InvalidArgumentError,
         "Stride must be > 0"),
        (dict(ksize=[2, 2, 2, 1], strides=[1, 1, 1, 1]), tf.errors.UnimplementedError,
         "batch dimension"),
        (dict(ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2]), tf.errors.UnimplementedError,
         "Depthwise max pooling is currently only implemented for CPU devices"),
    ],
)
def test_pool_with_bad_attributes_fails_like_tensorflow(kwargs, error, message):
    with pytest.raises(error, match=message):
        run_pool_on_gpu(input=tf.ones([1, 4, 4, 2]), padding="VALID", **kwargs)


@pytest.mark.parametrize(
    "ksize,strides,message",
    [
        ([1, 2, 2, 2], [1, 1, 1, 2], "exactly one of pooling across depth"),
        ([1, 1, 1, 2], [1, 1, 1, 1], "depth window to equal the depth stride"),
        ([1, 1, 1, 3], [1, 1, 1, 3], "evenly divide"),
        ([1, 1, 1, 2], [1, 1, 1, 2], "for CPU devices"),
    ],
)
def test_depthwise_max_pool_configurations_fail_in_tensorflows_order(ksize, strides, message):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.UnimplementedError, match=message):
        tf.nn.max_pool2d(tf.ones([1, 2, 2, 4]), ksize, strides, "SAME")


def test_a_depth_stride_with_a_depth_window_of_one_pools_spatially_like_tensorflows_gpu():
    """TensorFlow's GPU kernels ignore the depth stride when the depth window is 1: AvgPoolGrad
    then expects the gradient of a spatial pooling (InvalidArgument naming the shape it
    expected), where the message used to be the depthwise one."""
    with tf.device("/GPU:0"), pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"Expected grad shape to be \[1,1,3,1\], but got \[3,1,3,1\]"):
        tf.raw_ops.AvgPoolGrad(orig_input_shape=[1, 1, 3, 1],
                               grad=tf.ones([3, 1, 3, 1]), ksize=[1, 1, 1, 1],
                               strides=[1, 1, 1, 2], padding="VALID", data_format="NHWC")
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="Expected grad shape"):
        tf.raw_ops.AvgPoolGrad(orig_input_shape=[11, 9, 78, 9],
                               grad=tf.fill([16, 16, 16, 16], 0.1), ksize=[1, 40, 128, 1],
                               strides=[1, 128, 128, 30], padding="SAME", data_format="NHWC")


def test_pool_of_a_rank_3_input_is_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError):
        run_pool_on_gpu(input=tf.ones([4, 4, 2]), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1],
                        padding="VALID")


def test_pool_gradients_with_a_mismatched_grad_shape_are_invalid_argument():
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    with pytest.raises(tf.errors.InvalidArgumentError, match="Expected grad shape"):
        run_pool_on_gpu(op="AvgPoolGrad", orig_input_shape=[1, 4, 4, 1],
                        grad=tf.ones([1, 3, 2, 1]), **attrs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Expected grad shape"):
        run_pool_on_gpu(op="MaxPoolGrad", orig_input=tf.ones([1, 4, 4, 1]),
                        orig_output=tf.ones([1, 2, 2, 1]), grad=tf.ones([1, 3, 2, 1]), **attrs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="4 elements"):
        run_pool_on_gpu(op="AvgPoolGrad", orig_input_shape=[4, 4, 1],
                        grad=tf.ones([1, 2, 2, 1]), **attrs)


def test_pool_kernels_use_descriptors_created_and_destroyed_per_call():
    x = random_array((1, 4, 4, 2), np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.nn.max_pool2d(x, 2, 2, "VALID").numpy()
        tf.nn.avg_pool2d(x, 2, 2, "VALID").numpy()
    calls = vgpu.stats()["descriptor_calls"]
    assert calls["pooling"]["create"] == calls["pooling"]["destroy"] == 2
    assert calls["tensor"]["create"] == calls["tensor"]["destroy"] == 4


# MaxPoolV2 / MaxPoolGradV2 / MaxPoolGradGrad(V2): ksize and strides as host int32 tensors, and
# the second-order gradient of max pooling.

def max_pool_v2(t, ksize, strides, padding, data_format="NHWC"):
    return tf.raw_ops.MaxPoolV2(input=t, ksize=tf.constant(ksize, tf.int32),
                                strides=tf.constant(strides, tf.int32), padding=padding,
                                data_format=data_format)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_max_pool_v2_matches_cpu(dtype, padding, shape, ksize, strides):
    x = random_array(shape, dtype, seed=13)
    assert_matches_cpu(
        lambda t: max_pool_v2(t, [1, *ksize, 1], [1, *strides, 1], padding), x, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_max_pool_v2_gradient_matches_cpu(dtype, padding):
    # Few distinct values: ties everywhere, the first maximum of each window takes the gradient.
    x = np.random.default_rng(14).integers(0, 4, size=(2, 7, 6, 3)).astype(dtype)

    def gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            out = max_pool_v2(t, [1, 3, 2, 1], [1, 2, 1, 1], padding)
        weights = random_array(out.shape, dtype, seed=15)
        return tape.gradient(out, t, output_gradients=tf.constant(weights))

    assert_matches_cpu(gradient, x, rtol=0, atol=0)


def test_max_pool_v2_in_nchw_matches_nhwc_on_cpu():
    x = random_array((2, 8, 7, 5), np.float32, seed=16)
    expected = run_on("/CPU:0", lambda t: max_pool_v2(t, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), x)
    actual = run_on("/GPU:0", lambda t: max_pool_v2(t, [1, 1, 3, 3], [1, 1, 2, 2], "SAME",
                                                    "NCHW"), to_nchw(x))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(to_nhwc(actual.numpy()), expected.numpy())


def max_pool_grad_grad(x, y, g, ksize, strides, padding, v2, data_format="NHWC"):
    if v2:
        return tf.raw_ops.MaxPoolGradGradV2(
            orig_input=x, orig_output=y, grad=g, ksize=tf.constant(ksize, tf.int32),
            strides=tf.constant(strides, tf.int32), padding=padding, data_format=data_format)
    return tf.raw_ops.MaxPoolGradGrad(orig_input=x, orig_output=y, grad=g, ksize=ksize,
                                      strides=strides, padding=padding, data_format=data_format)


@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_max_pool_grad_grad_matches_cpu(v2, dtype, padding, shape, ksize, strides):
    # Integer values: windows with several maxima; the first one equal to the output wins.
    x = np.random.default_rng(17).integers(0, 5, size=shape).astype(dtype)
    attrs = dict(ksize=[1, *ksize, 1], strides=[1, *strides, 1], padding=padding)
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool(input=t, **attrs), x).numpy()
    g = random_array(shape, dtype, seed=18)
    assert_matches_cpu(lambda a, b, c: max_pool_grad_grad(a, b, c, v2=v2, **attrs), x, y, g,
                       rtol=0, atol=0)


def test_max_pool_grad_grad_in_nchw_matches_nhwc_on_cpu():
    x = np.random.default_rng(19).integers(0, 5, size=(2, 7, 6, 3)).astype(np.float32)
    attrs = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 1, 1], padding="SAME")
    nchw = dict(ksize=[1, 1, 3, 3], strides=[1, 1, 2, 1], padding="SAME")
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool(input=t, **attrs), x).numpy()
    g = random_array(x.shape, np.float32, seed=20)
    expected = run_on("/CPU:0", lambda a, b, c: max_pool_grad_grad(a, b, c, v2=False, **attrs),
                      x, y, g)
    actual = run_on("/GPU:0", lambda a, b, c: max_pool_grad_grad(a, b, c, v2=False,
                                                                 data_format="NCHW", **nchw),
                    to_nchw(x), to_nchw(y), to_nchw(g))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(to_nhwc(actual.numpy()), expected.numpy())


def test_second_order_gradient_of_max_pool_matches_cpu():
    # d/dv of sum(u * d(max_pool(x))/dx . v): TensorFlow differentiates MaxPoolGrad with
    # MaxPoolGradGrad.
    x = random_array((2, 6, 5, 3), np.float32, seed=21)
    v = random_array((2, 3, 3, 3), np.float32, seed=22)
    u = tf.constant(random_array(x.shape, np.float32, seed=23))

    def second_order(t, w):
        with tf.GradientTape() as outer:
            outer.watch(w)
            with tf.GradientTape() as inner:
                inner.watch(t)
                out = tf.nn.max_pool2d(t, 3, 2, "SAME")
            dx = inner.gradient(out, t, output_gradients=w)
            total = tf.reduce_sum(dx * u)
        return outer.gradient(total, w)

    assert_matches_cpu(second_order, x, v, rtol=0, atol=0)


def test_max_pool_grad_with_explicit_padding_matches_cpu():
    x = np.random.default_rng(24).integers(0, 4, size=(2, 6, 7, 3)).astype(np.float32)
    attrs = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="EXPLICIT",
                 explicit_paddings=[0, 0, 1, 2, 2, 1, 0, 0])
    y = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPool(input=t, **attrs), x).numpy()
    dy = random_array(y.shape, np.float32, seed=25)
    assert_matches_cpu(
        lambda a, b, c: tf.raw_ops.MaxPoolGrad(orig_input=a, orig_output=b, grad=c, **attrs),
        x, y, dy, rtol=0, atol=0)


def test_max_pool_grad_shape_errors_are_invalid_argument_as_in_tensorflow():
    # TensorFlow's testMaxPoolGradEagerShapeErrors, on the virtual GPU.
    ones = lambda *shape: tf.ones(shape)  # noqa: E731
    attrs = dict(ksize=[1, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID")
    with tf.device("/GPU:0"):
        for op in (tf.raw_ops.MaxPoolGrad, tf.raw_ops.MaxPoolGradGrad):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected orig_output shape to be \[1,1,1,1\], but got "
                                     r"\[1,1,1,2\]"):
                op(orig_input=ones(1, 1, 1, 1), orig_output=ones(1, 1, 1, 2),
                   grad=ones(1, 1, 1, 1), **attrs)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected grad shape to be \[1,1,1,1\], but got "
                                     r"\[1,1,1,2\]"):
                op(orig_input=ones(1, 1, 1, 1), orig_output=ones(1, 1, 1, 1),
                   grad=ones(1, 1, 1, 2), **attrs)


@pytest.mark.parametrize(
    "ksize,strides,error,message",
    [
        ([1, 2, 2], [1, 1, 1, 1], tf.errors.InvalidArgumentError,
         "Sliding window ksize field must specify 4 dimensions"),
        ([1, 2, 2, 1], [1, 1, 1], tf.errors.InvalidArgumentError,
         "Sliding window stride field must specify 4 dimensions"),
        ([2, 2, 2, 1], [1, 1, 1, 1], tf.errors.UnimplementedError,
         "Pooling is not yet supported on the batch dimension"),
        ([1, 1, 1, 2], [1, 1, 1, 2], tf.errors.UnimplementedError,
         "Depthwise max pooling is currently only implemented for CPU devices"),
        ([1, 2, 2, 1], [1, 0, 1, 1], tf.errors.InvalidArgumentError, "Stride must be > 0"),
    ],
)
def test_max_pool_v2_with_bad_window_inputs_fails_like_tensorflow(ksize, strides, error,
                                                                   message):
    with tf.device("/GPU:0"), pytest.raises(error, match=message):
        max_pool_v2(tf.ones([1, 4, 4, 2]), ksize, strides, "VALID")


def test_max_pool_grad_v2_with_bad_window_inputs_names_the_strides_field():
    x = tf.ones([1, 4, 4, 1])
    with tf.device("/GPU:0"), pytest.raises(
            tf.errors.InvalidArgumentError,
            match="Sliding window strides field must specify 4 dimensions"):
        tf.raw_ops.MaxPoolGradV2(orig_input=x, orig_output=x, grad=x,
                                 ksize=tf.constant([1, 1, 1, 1]), strides=tf.constant([1, 1]),
                                 padding="VALID")


def test_max_pool_with_padding_as_large_as_the_window_is_invalid_argument():
    # TensorFlow's testEdgeCasesExcessPadding.
    with tf.device("/GPU:0"), pytest.raises(
            tf.errors.InvalidArgumentError,
            match="Right padding 2 needs to be smaller than the window size 2"):
        tf.raw_ops.MaxPool(input=tf.ones([1, 3, 3, 1]), ksize=[1, 2, 2, 1],
                           strides=[1, 2, 2, 1], padding="EXPLICIT",
                           explicit_paddings=[0, 0, 0, 1, 0, 2, 0, 0])


def test_max_pool_grad_of_an_empty_input_is_empty():
    x = tf.zeros([0, 4, 4, 2])
    with tf.device("/GPU:0"):
        y = tf.nn.max_pool2d(x, 2, 2, "VALID")
        dx = tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=y, ksize=[1, 2, 2, 1],
                                    strides=[1, 2, 2, 1], padding="VALID")
    assert dx.shape == (0, 4, 4, 2) and dx.device.endswith("GPU:0")
