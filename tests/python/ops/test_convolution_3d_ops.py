"""3-D convolutions on the virtual GPU against TensorFlow's CPU kernels: Conv3D and its
gradients (Conv3DBackpropInputV2, Conv3DBackpropFilterV2) in NDHWC and NCDHW, with strides,
dilations, SAME/VALID padding, groups, every registered dtype and empty shapes, and the error
classes of bad arguments.

TensorFlow's CPU kernels take NDHWC only, reject dilations in their gradients and have no
grouped 3-D convolutions, so NCDHW results are compared transposed, dilated ones against a
convolution with the dilated filter (zeros between the taps), and grouped ones against
per-group convolutions."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import BF16, random_array, tolerance_table

TOLERANCE = tolerance_table(float64=(1e-10, 1e-10), float32=(1e-4, 1e-4), float16=(2e-2, 3e-2),
                            bfloat16=(5e-2, 1e-1))
FORMATS = ["NDHWC", "NCDHW"]


def assert_close(actual, expected, dtype):
    assert actual.shape == expected.shape
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               **TOLERANCE[np.dtype(dtype).type])


def to_format(t, data_format):
    return tf.transpose(t, (0, 4, 1, 2, 3)) if data_format == "NCDHW" else t


def from_format(t, data_format):
    return tf.transpose(t, (0, 2, 3, 4, 1)) if data_format == "NCDHW" else t


def in_format(values, data_format):
    """A [N, D, H, W, C]-ordered attribute list in `data_format`."""
    n, d, h, w, c = values
    return [n, c, d, h, w] if data_format == "NCDHW" else [n, d, h, w, c]


def dilated(w, dilations):
    """The filter with dilation - 1 zeros between its taps (differentiable)."""
    for axis, rate in enumerate(dilations):
        if rate == 1:
            continue
        parts = tf.unstack(w, axis=axis)
        spaced = []
        for i, part in enumerate(parts):
            spaced.append(part)
            if i < len(parts) - 1:
                spaced.extend([tf.zeros_like(part)] * (rate - 1))
        w = tf.stack(spaced, axis=axis)
    return w


def conv3d(data_format, strides, dilations, padding):
    """Conv3D on NDHWC tensors, computed in `data_format`."""
    def conv(x, w):
        return from_format(tf.raw_ops.Conv3D(
            input=to_format(x, data_format), filter=w,
            strides=in_format([1, *strides, 1], data_format),
            dilations=in_format([1, *dilations, 1], data_format), padding=padding,
            data_format=data_format), data_format)
    return conv


def cpu_reference(strides, dilations, padding, groups=1):
    """The CPU's NDHWC Conv3D with the dilated filter, group by group."""
    def conv(x, w):
        w = dilated(w, dilations)
        outputs = [tf.raw_ops.Conv3D(input=a, filter=b, strides=[1, *strides, 1],
                                     padding=padding)
                   for a, b in zip(tf.split(x, groups, axis=4), tf.split(w, groups, axis=4))]
        return tf.concat(outputs, axis=4)
    return conv


def values_and_gradients(device, fn, x, w, seed=7):
    """fn(x, w) and the gradients of sum(fn(x, w) * u) for a fixed random u, on `device`."""
    with tf.device(device):
        x, w = tf.constant(x), tf.constant(w)
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = fn(x, w)
        u = tf.constant(random_array(y.shape, y.dtype.as_numpy_dtype, seed=seed))
        dx, dw = tape.gradient(y, [x, w], output_gradients=u)
    for t in (y, dx, dw):
        assert t.device.endswith(device.strip("/")), f"computed on {t.device}"
    return y.numpy(), dx.numpy(), dw.numpy()


CASES = [
    pytest.param(strides, dilations, padding,
                 id=f"{padding}-strides{''.join(map(str, strides))}"
                    f"-dilations{''.join(map(str, dilations))}")
    for strides, dilations, padding in [
        ((1, 1, 1), (1, 1, 1), "VALID"), ((1, 1, 1), (1, 1, 1), "SAME"),
        ((2, 1, 2), (1, 1, 1), "SAME"), ((1, 2, 1), (1, 1, 1), "VALID"),
        ((1, 1, 1), (2, 1, 2), "SAME"), ((2, 2, 1), (1, 2, 2), "VALID"),
    ]
]


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("strides,dilations,padding", CASES)
def test_conv3d_and_gradients_match_cpu(data_format, strides, dilations, padding):
    x = random_array((2, 5, 6, 7, 3), np.float32, seed=1, low=-1, high=1)
    w = random_array((2, 3, 2, 3, 4), np.float32, seed=2, low=-1, high=1)
    vgpu.reset_stats()
    actual = values_and_gradients("/GPU:0", conv3d(data_format, strides, dilations, padding),
                                  x, w)
    assert vgpu.stats()["launches"] >= 3
    expected = values_and_gradients("/CPU:0", cpu_reference(strides, dilations, padding), x, w)
    for a, e in zip(actual, expected):
        assert_close(a, e, np.float32)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("groups", [2, 3])
def test_grouped_conv3d_and_gradients_match_per_group_convolutions(data_format, groups):
    x = random_array((2, 4, 5, 6, 6), np.float32, seed=3, low=-1, high=1)
    w = random_array((2, 2, 3, 6 // groups, 6), np.float32, seed=4, low=-1, high=1)
    actual = values_and_gradients("/GPU:0", conv3d(data_format, (1, 2, 1), (1, 1, 1), "SAME"),
                                  x, w)
    expected = values_and_gradients("/CPU:0", cpu_reference((1, 2, 1), (1, 1, 1), "SAME",
                                                            groups), x, w)
    for a, e in zip(actual, expected):
        assert_close(a, e, np.float32)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64])
@pytest.mark.parametrize("data_format", FORMATS)
def test_conv3d_and_gradients_match_cpu_in_other_dtypes(dtype, data_format):
    x = random_array((2, 4, 5, 4, 3), dtype, seed=5, low=-1, high=1)
    w = random_array((2, 2, 3, 3, 2), dtype, seed=6, low=-1, high=1)
    actual = values_and_gradients("/GPU:0", conv3d(data_format, (1, 1, 2), (1, 1, 1), "SAME"),
                                  x, w)
    expected = values_and_gradients("/CPU:0", cpu_reference((1, 1, 2), (1, 1, 1), "SAME"), x, w)
    for a, e in zip(actual, expected):
        assert_close(a, e, dtype)


@pytest.mark.parametrize("data_format", FORMATS)
def test_conv3d_backprop_ops_match_cpu(data_format):
    x = random_array((2, 5, 4, 6, 3), np.float32, seed=8, low=-1, high=1)
    w = random_array((3, 2, 2, 3, 4), np.float32, seed=9, low=-1, high=1)
    dy = random_array((2, 3, 2, 3, 4), np.float32, seed=10, low=-1, high=1)
    attributes = dict(strides=in_format([1, 1, 2, 2, 1], data_format), padding="VALID",
                      data_format=data_format)

    def backprops(attributes, data_format):
        def run(x, w, dy):
            dx = tf.raw_ops.Conv3DBackpropInputV2(
                input_sizes=tf.shape(to_format(x, data_format)), filter=w,
                out_backprop=to_format(dy, data_format), **attributes)
            dw = tf.raw_ops.Conv3DBackpropFilterV2(
                input=to_format(x, data_format), filter_sizes=tf.shape(w),
                out_backprop=to_format(dy, data_format), **attributes)
            return from_format(dx, data_format), dw
        return run

    with tf.device("/GPU:0"):
        actual = backprops(attributes, data_format)(x, w, dy)
    with tf.device("/CPU:0"):
        expected = backprops(dict(strides=[1, 1, 2, 2, 1], padding="VALID"), "NDHWC")(x, w, dy)
    for a, e in zip(actual, expected):
        assert a.device.endswith("GPU:0")
        assert_close(a.numpy(), e.numpy(), np.float32)


def test_conv3d_1x1x1_filter_and_whole_input_filter_match_cpu():
    x = random_array((2, 3, 4, 5, 4), np.float32, seed=11, low=-1, high=1)
    for w_shape in [(1, 1, 1, 4, 3), (3, 4, 5, 4, 3)]:
        w = random_array(w_shape, np.float32, seed=12, low=-1, high=1)
        actual = values_and_gradients("/GPU:0", conv3d("NDHWC", (1, 1, 1), (1, 1, 1), "VALID"),
                                      x, w)
        expected = values_and_gradients("/CPU:0", cpu_reference((1, 1, 1), (1, 1, 1), "VALID"),
                                        x, w)
        for a, e in zip(actual, expected):
            assert_close(a, e, np.float32)


def test_conv3d_of_an_empty_batch_and_of_padding_only():
    w = random_array((2, 2, 2, 3, 4), np.float32, seed=13)
    conv = conv3d("NDHWC", (1, 1, 1), (1, 1, 1), "SAME")
    y, dx, dw = values_and_gradients("/GPU:0", conv, np.zeros((0, 4, 4, 4, 3), np.float32), w)
    assert y.shape == (0, 4, 4, 4, 4) and dx.shape == (0, 4, 4, 4, 3)
    assert dw.shape == w.shape and not np.any(dw)
    # An input with no planes: SAME keeps 0 planes, so the output is empty too.
    y = conv3d("NDHWC", (1, 1, 1), (1, 1, 1), "SAME")(tf.zeros((1, 0, 4, 4, 3)), w)
    assert y.shape == (1, 0, 4, 4, 4)


def test_deprecated_v1_backprops_are_rejected_like_on_the_cpu():
    # Conv3DBackpropInput/Filter (V1) were removed in GraphDef version 10; TensorFlow refuses
    # to run them in current programs on every device (the plugin registers them as
    # TensorFlow's GPU build does, for graphs of older versions).
    x, w, dy = tf.ones([1, 3, 3, 3, 2]), tf.ones([2, 2, 2, 2, 3]), tf.ones([1, 2, 2, 2, 3])
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.UnimplementedError,
                                              match="GraphDef version"):
            tf.raw_ops.Conv3DBackpropInput(input=x, filter=w, out_backprop=dy,
                                           strides=[1] * 5, padding="VALID")


def _raises_on_gpu(fn, error, match):
    with tf.device("/GPU:0"), pytest.raises(error, match=match) as info:
        fn()
    assert "GPU:0" in str(info.value), "the error did not come from the virtual GPU's kernel"


X = tf.ones([1, 4, 4, 4, 2])
W = tf.ones([2, 2, 2, 2, 3])
BAD = {
    "batch-stride": (lambda: tf.raw_ops.Conv3D(input=X, filter=W, strides=[2, 1, 1, 1, 1],
                                               padding="SAME"),
                     tf.errors.InvalidArgumentError, "batch and depth"),
    "zero-stride": (lambda: tf.raw_ops.Conv3D(input=X, filter=W, strides=[1, 0, 1, 1, 1],
                                              padding="SAME"),
                    tf.errors.InvalidArgumentError, "Spatial strides should be larger than 0"),
    "strides-count": (lambda: tf.raw_ops.Conv3D(input=X, filter=W, strides=[1] * 6,
                                                padding="SAME"),
                      tf.errors.InvalidArgumentError, "strides field must specify 5"),
    "depth-dilation": (lambda: tf.raw_ops.Conv3D(input=X, filter=W, strides=[1] * 5,
                                                 dilations=[1, 1, 1, 1, 2], padding="SAME"),
                       tf.errors.InvalidArgumentError, "dilation rates in the batch"),
    "rank-4-input": (lambda: tf.raw_ops.Conv3D(input=X[0], filter=W, strides=[1] * 5,
                                               padding="SAME"),
                     tf.errors.InvalidArgumentError, "input must be 5-dimensional"),
    "depth-not-divisible": (lambda: tf.raw_ops.Conv3D(input=tf.ones([1, 4, 4, 4, 3]), filter=W,
                                                      strides=[1] * 5, padding="SAME"),
                            tf.errors.InvalidArgumentError, "evenly divisible by filter depth"),
    "empty-filter": (lambda: tf.raw_ops.Conv3D(input=X, filter=tf.ones([0, 2, 2, 2, 3]),
                                               strides=[1] * 5, padding="SAME"),
                     tf.errors.InvalidArgumentError, "filter must not have zero elements"),
    "filter-larger-than-input": (lambda: tf.raw_ops.Conv3D(
        input=X[:, :1], filter=tf.ones([3, 2, 2, 2, 3]), strides=[1] * 5, padding="VALID"),
        tf.errors.InvalidArgumentError, "negative"),
    "backprop-input-size-mismatch": (lambda: tf.raw_ops.Conv3DBackpropInputV2(
        input_sizes=[1, 4, 4, 4, 2], filter=W, out_backprop=tf.ones([1, 3, 4, 4, 3]),
        strides=[1] * 5, padding="SAME"), tf.errors.InvalidArgumentError, "doesn't match"),
    "backprop-input-sizes-rank": (lambda: tf.raw_ops.Conv3DBackpropInputV2(
        input_sizes=[[1, 4, 4, 4, 2]], filter=W, out_backprop=tf.ones([1, 4, 4, 4, 3]),
        strides=[1] * 5, padding="SAME"), tf.errors.InvalidArgumentError, "must be a vector"),
    "backprop-filter-negative-size": (lambda: tf.raw_ops.Conv3DBackpropFilterV2(
        input=X, filter_sizes=[2, 2, -2, 2, 3], out_backprop=tf.ones([1, 4, 4, 4, 3]),
        strides=[1] * 5, padding="SAME"), tf.errors.InvalidArgumentError, "must be >= 0"),
    "backprop-filter-batch-stride": (lambda: tf.raw_ops.Conv3DBackpropFilterV2(
        input=X, filter_sizes=[2, 2, 2, 2, 3], out_backprop=tf.ones([1, 4, 4, 4, 3]),
        strides=[2, 1, 1, 1, 1], padding="SAME"), tf.errors.InvalidArgumentError,
        "batch and depth"),
    "backprop-filter-out-depth": (lambda: tf.raw_ops.Conv3DBackpropFilterV2(
        input=X, filter_sizes=[2, 2, 2, 2, 5], out_backprop=tf.ones([1, 4, 4, 4, 3]),
        strides=[1] * 5, padding="SAME"), tf.errors.InvalidArgumentError, "same out_depth"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_arguments_raise_tensorflows_error_classes(case):
    fn, error, match = BAD[case]
    _raises_on_gpu(fn, error, match)
