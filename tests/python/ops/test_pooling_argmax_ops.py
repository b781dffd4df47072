"""Max pooling with argmax on the virtual GPU: MaxPoolWithArgmax (Targmax int64 and int32,
include_batch_in_index on and off) gives TensorFlow's CPU outputs and argmax indices exactly,
ties, NaNs and -inf included; MaxPoolGradWithArgmax matches the CPU and routes gradients where
an argmax points; MaxPoolGradGradWithArgmax (a GPU-only op in TensorFlow) gathers at the argmax;
bad shapes and argmax values fail with TensorFlow's error classes."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_matches_cpu, random_array, run_on

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
GEOMETRIES = [
    ((2, 7, 9, 3), (3, 3), (2, 2)),
    ((3, 6, 5, 4), (2, 3), (1, 2)),
    ((1, 5, 5, 1), (5, 5), (3, 3)),
]


def with_argmax(ksize, strides, padding, include_batch_in_index=False, targmax=tf.int64):
    def pool(t):
        return tf.raw_ops.MaxPoolWithArgmax(
            input=t, ksize=[1, *ksize, 1], strides=[1, *strides, 1], padding=padding,
            Targmax=targmax, include_batch_in_index=include_batch_in_index)

    return pool


@pytest.mark.parametrize("targmax", [tf.int64, tf.int32], ids=["int64", "int32"])
@pytest.mark.parametrize("include_batch", [False, True], ids=["image_index", "batch_index"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_max_pool_with_argmax_matches_cpu_exactly(targmax, include_batch, dtype, padding, shape,
                                                   ksize, strides):
    # Few distinct values: most windows hold several maxima, the first one wins.
    x = np.random.default_rng(1).integers(-2, 3, size=shape).astype(dtype)
    y, argmax = assert_matches_cpu(
        with_argmax(ksize, strides, padding, include_batch, targmax), x, rtol=0, atol=0)
    assert argmax.dtype == targmax


def test_max_pool_with_argmax_gives_tensorflows_documented_indices():
    # TensorFlow's testMaxPoolingWithArgmax, on the virtual GPU.
    x = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0,
                  1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0], np.float32).reshape(2, 3, 3, 1)
    for include_batch, expected in [(False, [0, 1, 3, 5, 0, 2, 6, 8]),
                                    (True, [0, 1, 3, 5, 9, 11, 15, 17])]:
        y, argmax = run_on("/GPU:0", with_argmax((2, 2), (1, 1), "VALID", include_batch), x)
        assert argmax.device.endswith("GPU:0")
        np.testing.assert_array_equal(y.numpy().ravel(), np.ones(8))
        np.testing.assert_array_equal(argmax.numpy().ravel(), expected)


def test_max_pool_with_argmax_handles_nan_and_minus_infinity_like_cpu():
    # The CPU takes a window's first element, then every larger one: a NaN in first position
    # stays, a NaN later is skipped, and a window of -inf gives -inf at its first element.
    x = np.array([np.nan, 1, 2, np.nan, -np.inf, -np.inf, 0, 5], np.float32).reshape(1, 2, 4, 1)
    y, argmax = assert_matches_cpu(with_argmax((1, 2), (1, 2), "VALID"), x, rtol=0, atol=0)
    np.testing.assert_array_equal(y.numpy().ravel(), [np.nan, 2, -np.inf, 5])
    np.testing.assert_array_equal(argmax.numpy().ravel(), [0, 2, 4, 7])


@pytest.mark.parametrize("include_batch", [False, True], ids=["image_index", "batch_index"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("shape,ksize,strides", GEOMETRIES)
def test_max_pool_grad_with_argmax_matches_cpu(include_batch, dtype, padding, shape, ksize,
                                               strides):
    x = np.random.default_rng(2).integers(-2, 3, size=shape).astype(dtype)
    y, argmax = run_on("/CPU:0", with_argmax(ksize, strides, padding, include_batch), x)
    dy = random_array(y.shape, dtype, seed=3)
    attrs = dict(ksize=[1, *ksize, 1], strides=[1, *strides, 1], padding=padding,
                 include_batch_in_index=include_batch)
    assert_matches_cpu(
        lambda a, g, m: tf.raw_ops.MaxPoolGradWithArgmax(input=a, grad=g, argmax=m, **attrs),
        x, dy, argmax.numpy())


def test_gradient_of_max_pool_with_argmax_matches_cpu():
    # tf.nn.max_pool_with_argmax's registered gradient is MaxPoolGradWithArgmax.
    x = random_array((2, 8, 7, 4), np.float32, seed=4)

    def gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y, _ = tf.nn.max_pool_with_argmax(t, 3, 2, "SAME", include_batch_in_index=True)
        return tape.gradient(y, t, output_gradients=tf.constant(
            random_array(y.shape, np.float32, seed=5)))

    assert_matches_cpu(gradient, x, rtol=0, atol=0)


# TensorFlow's own argmax tests pool 2x2 windows of stride 1 over two 3x3 images; the argmax of
# their eight windows, counted per image and over the batch.
DOCUMENTED_ARGMAX = [(False, [0, 1, 3, 5, 0, 2, 6, 8]), (True, [0, 1, 3, 5, 9, 11, 15, 17])]


def run_documented_case_on_gpu(op, x, upstream, argmax, include_batch):
    """`op` (tf.raw_ops.MaxPoolGradWithArgmax or MaxPoolGradGradWithArgmax) on GPU:0 over the
    2x2 windows of stride 1 of TensorFlow's tests, with the eight `argmax` indices given."""
    return run_on("/GPU:0", lambda a, g, m: op(
        input=a, grad=g, argmax=m, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID",
        include_batch_in_index=include_batch),
        x, upstream, np.array(argmax, np.int64).reshape(2, 2, 2, 1))


def test_max_pool_grad_with_argmax_adds_up_gradients_routed_to_one_element():
    # TensorFlow's testMaxPoolingGradWithArgmax: several windows pick element 0 or 2.
    x = np.ones((2, 3, 3, 1), np.float32)
    dy = np.array([11.0, 12.0, 13.0, 14.0, 21.0, 22.0, 23.0, 24.0], np.float32).reshape(2, 2, 2, 1)
    expected = [11.0, 12.0, 0.0, 13.0, 0.0, 14.0, 0.0, 0.0, 0.0,
                21.0, 0.0, 22.0, 0.0, 0.0, 0.0, 23.0, 0.0, 24.0]
    for include_batch, argmax in DOCUMENTED_ARGMAX:
        dx = run_documented_case_on_gpu(tf.raw_ops.MaxPoolGradWithArgmax, x, dy, argmax,
                                        include_batch)
        assert dx.device.endswith("GPU:0")
        np.testing.assert_array_equal(dx.numpy().ravel(), expected)
    # Collisions: every output of both images routed to element 0 of the batch (legal with
    # include_batch_in_index), summed in output order.
    dx = run_documented_case_on_gpu(tf.raw_ops.MaxPoolGradWithArgmax, x, dy, [0] * 8,
                                    include_batch=True)
    np.testing.assert_array_equal(dx.numpy().ravel(), [dy.sum()] + [0.0] * 17)


@pytest.mark.parametrize("include_batch", [False, True], ids=["image_index", "batch_index"])
@pytest.mark.parametrize("dtype", FLOATING)
def test_max_pool_grad_grad_with_argmax_gathers_at_the_argmax(include_batch, dtype):
    x = np.random.default_rng(6).integers(-2, 3, size=(2, 7, 6, 3)).astype(dtype)
    attrs = dict(ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding="SAME",
                 include_batch_in_index=include_batch)
    _, argmax = run_on("/CPU:0", lambda t: tf.raw_ops.MaxPoolWithArgmax(input=t, **attrs), x)
    ddx = random_array(x.shape, dtype, seed=7)
    ddy = run_on("/GPU:0", lambda a, g, m: tf.raw_ops.MaxPoolGradGradWithArgmax(
        input=a, grad=g, argmax=m, **attrs), x, ddx, argmax.numpy())
    assert ddy.device.endswith("GPU:0") and ddy.dtype == dtype
    index = argmax.numpy()
    if not include_batch:
        index = index + np.arange(2).reshape(2, 1, 1, 1) * x[0].size
    np.testing.assert_array_equal(ddy.numpy(), ddx.ravel()[index])


def test_max_pool_grad_grad_with_argmax_gives_tensorflows_documented_values():
    # TensorFlow's testMaxPoolingGradGradWithArgmax (GPU only there).
    x = np.ones((2, 3, 3, 1), np.float32)
    ddx = np.array([11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0,
                    21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0],
                   np.float32).reshape(2, 3, 3, 1)
    for include_batch, argmax in DOCUMENTED_ARGMAX:
        ddy = run_documented_case_on_gpu(tf.raw_ops.MaxPoolGradGradWithArgmax, x, ddx, argmax,
                                         include_batch)
        np.testing.assert_array_equal(ddy.numpy().ravel(),
                                      [11.0, 12.0, 14.0, 16.0, 21.0, 23.0, 27.0, 29.0])


def test_max_pool_grad_grad_with_argmax_gives_zero_for_an_argmax_outside_the_input():
    x = np.ones((1, 2, 2, 1), np.float32)
    ddy = run_on("/GPU:0", lambda a, g, m: tf.raw_ops.MaxPoolGradGradWithArgmax(
        input=a, grad=g, argmax=m, ksize=[1, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID"),
        x, np.arange(1, 5, dtype=np.float32).reshape(1, 2, 2, 1),
        np.array([3, -1, 4, 1], np.int64).reshape(1, 2, 2, 1))
    np.testing.assert_array_equal(ddy.numpy().ravel(), [4.0, 0.0, 0.0, 2.0])


def test_argmax_shape_errors_are_invalid_argument_as_in_tensorflow():
    # TensorFlow's testMaxPoolGradWithArgmaxEagerShapeErrors, on the virtual GPU.
    attrs = dict(ksize=[1, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID")
    x = tf.ones((1, 1, 1, 1))
    with tf.device("/GPU:0"):
        for op in (tf.raw_ops.MaxPoolGradWithArgmax, tf.raw_ops.MaxPoolGradGradWithArgmax):
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected grad shape to be \[1,1,1,1\], but got "
                                     r"\[1,1,1,2\]"):
                op(input=x, grad=tf.ones((1, 1, 1, 2)),
                   argmax=tf.zeros((1, 1, 1, 1), tf.int64), **attrs)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"Expected argmax shape to be \[1,1,1,1\], but got "
                                     r"\[1,1,1,2\]"):
                op(input=x, grad=tf.ones((1, 1, 1, 1)),
                   argmax=tf.ones((1, 1, 1, 2), tf.int64), **attrs)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (dict(input=tf.zeros([0, 4, 4, 1])), tf.errors.InvalidArgumentError,
         r"tensor_in must not be empty"),
        (dict(input=tf.ones([4, 4, 1])), tf.errors.InvalidArgumentError,
         r"tensor_in must be 4-dimensional"),
        (dict(input=tf.ones([1, 4, 4, 1]), ksize=[1, 0, 2, 1]), tf.errors.InvalidArgumentError,
         "ksize must be a positive int32 value, got:0"),
        (dict(input=tf.ones([1, 4, 4, 1]), strides=[2, 1, 1, 1]), tf.errors.UnimplementedError,
         "Pooling is not yet supported on the batch dimension"),
        (dict(input=tf.ones([1, 4, 4, 1]), ksize=[1, 6, 6, 1]), tf.errors.InvalidArgumentError,
         "output size would be negative"),
    ],
)
def test_max_pool_with_argmax_with_bad_input_fails_like_tensorflow(kwargs, error, message):
    attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
    attrs.update(kwargs)
    with tf.device("/GPU:0"), pytest.raises(error, match=message):
        tf.raw_ops.MaxPoolWithArgmax(**attrs)


def test_an_argmax_outside_the_input_fails_the_gradient_and_the_device_stays_usable():
    # TensorFlow's CPU kernel aborts the process on such an index and its GPU kernel writes out
    # of bounds; the virtual GPU refuses it before writing anything.
    x = np.ones((1, 2, 2, 1), np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Invalid output gradient index"):
        run_on("/GPU:0", lambda a, g, m: tf.raw_ops.MaxPoolGradWithArgmax(
            input=a, grad=g, argmax=m, ksize=[1, 1, 1, 1], strides=[1, 1, 1, 1],
            padding="VALID"), x, x, np.array([0, 1, 2, 4], np.int64).reshape(1, 2, 2, 1)).numpy()
    vgpu.reset_stats()
    out = run_on("/GPU:0", lambda t: tf.nn.max_pool2d(t, 2, 2, "VALID"), x)
    np.testing.assert_array_equal(out.numpy(), [[[[1.0]]]])


def test_max_pool_grad_with_argmax_refuses_op_determinism_like_tensorflows_cuda_kernel():
    x = np.ones((1, 2, 2, 1), np.float32)
    argmax = np.array([0, 1, 2, 3], np.int64).reshape(1, 2, 2, 1)
    grad = lambda a, g, m: tf.raw_ops.MaxPoolGradWithArgmax(
        input=a, grad=g, argmax=m, ksize=[1, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID")
    tf.config.experimental.enable_op_determinism()
    try:
        with pytest.raises(tf.errors.UnimplementedError,
                           match="Determinism is not yet supported for MaxPoolGradWithArgmax"):
            run_on("/GPU:0", grad, x, x, argmax)
    finally:
        from tensorflow.python.framework import config  # noqa: PLC0415 - not in tf.config

        config.disable_op_determinism()
    np.testing.assert_array_equal(run_on("/GPU:0", grad, x, x, argmax).numpy(), x)
