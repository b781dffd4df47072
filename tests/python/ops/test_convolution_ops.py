"""Convolution-family ops on the virtual GPU against TensorFlow's CPU kernels: Conv2D (plain and
grouped) and its two backprops with their V2 variants, the generic Conv op, the
DepthwiseConv2dNative trio, MatMul,
BatchMatMulV2/V3, BiasAdd and BiasAddGrad. 3-D convolutions and Einsum have their own files.

TensorFlow's CPU convolutions (oneDNN or Eigen) sum in a different order than the plugin's
Eigen kernels, so float32 convolutions are compared with rtol/atol 1e-4; 16-bit types are
computed in float on both sides and differ by at most an ulp or so of the result. TensorFlow's
plain CPU kernels only take NHWC, so NCHW results on the GPU are compared with NHWC results on
the CPU, transposed."""
import numpy as np
import pytest
import tensorflow as tf

from tensorflow.python.eager import context, execute

import vgpu
from ops.op_testing import (BF16, assert_gradients_match_cpu, assert_matches_cpu, gradients_of,
                            random_array, run_on, tolerance_table)

CONV_TOLERANCE = tolerance_table(float64=(1e-10, 1e-10), float32=(1e-4, 1e-4),
                                 float16=(2e-2, 2e-2), bfloat16=(5e-2, 5e-2))
EXPLICIT_NHWC = [0, 0, 1, 2, 2, 0, 0, 0]  # asymmetric: top 1, bottom 2, left 2, right 0


def conv_tolerance(dtype):
    return CONV_TOLERANCE[np.dtype(dtype).type]


def to_format(array, data_format):
    """An NHWC array in `data_format`."""
    return np.transpose(array, (0, 3, 1, 2)) if data_format == "NCHW" else array


def from_format(array, data_format):
    """An array in `data_format` as NHWC."""
    return np.transpose(array, (0, 2, 3, 1)) if data_format == "NCHW" else array


def shape_in_format(shape, data_format):
    n, h, w, c = shape
    return [n, c, h, w] if data_format == "NCHW" else [n, h, w, c]


def conv_attributes(data_format, stride, dilation, padding):
    """Keyword arguments of the raw convolution ops for a padding name (valid/same/explicit);
    `stride` is one for both spatial dimensions or (rows, columns)."""
    rows, cols = stride if isinstance(stride, tuple) else (stride, stride)
    explicit = []
    if padding == "explicit":
        explicit = EXPLICIT_NHWC
        if data_format == "NCHW":
            explicit = explicit[0:2] + explicit[6:8] + explicit[2:6]
    return dict(
        strides=shape_in_format([1, rows, cols, 1], data_format),
        dilations=shape_in_format([1, dilation, dilation, 1], data_format),
        padding=padding.upper(),
        explicit_paddings=explicit,
        data_format=data_format,
    )


def on_device(device, fn, *args):
    with tf.device(device):
        result = fn(*[tf.constant(a) if isinstance(a, np.ndarray) else a for a in args])
    for r in tf.nest.flatten(result):
        assert r.device.endswith(device.strip("/")), f"computed on {r.device}"
    return tf.nest.map_structure(lambda t: t.numpy(), result)


def assert_close(actual, expected, dtype):
    assert actual.shape == expected.shape
    np.testing.assert_allclose(
        actual.astype(np.float64), expected.astype(np.float64), **conv_tolerance(dtype))


def dilate_filter(w, dilation):
    """The filter with dilation - 1 zeros between taps: a convolution with it and dilation 1
    equals one with `w` and `dilation`. TensorFlow's CPU backprop kernels reject some dilated
    cases, so dilated references are computed this way."""
    kh, kw = w.shape[:2]
    dilated = np.zeros(((kh - 1) * dilation + 1, (kw - 1) * dilation + 1) + w.shape[2:], w.dtype)
    dilated[::dilation, ::dilation] = w
    return dilated


def forward_shape(x_shape, w_shape, stride, dilation, padding):
    """NHWC output shape of a convolution, computed on the CPU."""
    x = np.zeros(x_shape, np.float32)
    w = np.zeros(w_shape, np.float32)
    return on_device(
        "/CPU:0",
        lambda a, b: tf.raw_ops.Conv2D(
            input=a, filter=b, **conv_attributes("NHWC", stride, dilation, padding)),
        x, w).shape


CONV_CASES = [
    pytest.param(padding, stride, dilation, id=f"{padding}-stride{stride}-dilation{dilation}")
    for padding in ("valid", "same", "explicit")
    for stride in (1, 2)
    for dilation in (1, 2)
]
FORMATS = ["NHWC", "NCHW"]


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("padding,stride,dilation", CONV_CASES)
def test_conv2d_matches_cpu(data_format, padding, stride, dilation):
    x = random_array((2, 7, 9, 3), np.float32, seed=1, low=-1, high=1)
    w = random_array((3, 2, 3, 4), np.float32, seed=2, low=-1, high=1)
    expected = on_device("/CPU:0", lambda a, b: tf.raw_ops.Conv2D(
        input=a, filter=b, **conv_attributes("NHWC", stride, dilation, padding)), x, w)
    vgpu.reset_stats()
    actual = on_device("/GPU:0", lambda a, b: tf.raw_ops.Conv2D(
        input=a, filter=b, **conv_attributes(data_format, stride, dilation, padding)),
        to_format(x, data_format), w)
    assert vgpu.stats()["launches"] >= 1
    assert_close(from_format(actual, data_format), expected, np.float32)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("padding,stride,dilation", CONV_CASES)
def test_conv2d_backprop_input_matches_cpu(data_format, padding, stride, dilation):
    x_shape, w_shape = (2, 7, 9, 3), (3, 2, 3, 4)
    w = random_array(w_shape, np.float32, seed=3, low=-1, high=1)
    dy = random_array(forward_shape(x_shape, w_shape, stride, dilation, padding), np.float32,
                      seed=4, low=-1, high=1)

    def backprop(data_format, dy, dilation):
        return lambda filter, out_backprop: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=shape_in_format(x_shape, data_format), filter=filter,
            out_backprop=out_backprop, **conv_attributes(data_format, stride, dilation, padding))

    expected = on_device("/CPU:0", backprop("NHWC", dy, 1), dilate_filter(w, dilation), dy)
    actual = on_device("/GPU:0", backprop(data_format, dy, dilation), w,
                       to_format(dy, data_format))
    assert_close(from_format(actual, data_format), expected, np.float32)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("padding,stride,dilation", CONV_CASES)
def test_conv2d_backprop_filter_matches_cpu(data_format, padding, stride, dilation):
    x_shape, w_shape = (2, 7, 9, 3), (3, 2, 3, 4)
    x = random_array(x_shape, np.float32, seed=5, low=-1, high=1)
    dy = random_array(forward_shape(x_shape, w_shape, stride, dilation, padding), np.float32,
                      seed=6, low=-1, high=1)

    def backprop(data_format, filter_shape, dilation):
        return lambda input, out_backprop: tf.raw_ops.Conv2DBackpropFilter(
            input=input, filter_sizes=list(filter_shape), out_backprop=out_backprop,
            **conv_attributes(data_format, stride, dilation, padding))

    dilated_shape = dilate_filter(np.zeros(w_shape), dilation).shape
    expected = on_device("/CPU:0", backprop("NHWC", dilated_shape, 1), x, dy)
    expected = expected[::dilation, ::dilation]
    actual = on_device("/GPU:0", backprop(data_format, w_shape, dilation),
                       to_format(x, data_format), to_format(dy, data_format))
    assert_close(actual, expected, np.float32)


# Shapes that take the kernels' special paths: 1x1 filters (a matrix product), a filter as
# large as the input (one), paddings wider than the filter (the padded backward path), batch 1.
SPECIAL_CONVOLUTIONS = {
    "1x1": ((2, 5, 6, 3), (1, 1, 3, 4), 1, "VALID"),
    "1x1-strided": ((2, 5, 6, 3), (1, 1, 3, 4), 2, "SAME"),
    "1x1-wide-padding": ((2, 5, 6, 3), (1, 1, 3, 4), 1, [[0, 0], [0, 2], [3, 0], [0, 0]]),
    "whole-input": ((3, 4, 5, 2), (4, 5, 2, 3), 1, "VALID"),
    "batch-1": ((1, 8, 8, 4), (3, 3, 4, 2), 1, "SAME"),
    "tall-filter-padding": ((2, 4, 4, 2), (3, 2, 2, 2), 2, [[0, 0], [0, 4], [1, 1], [0, 0]]),
}


@pytest.mark.parametrize("case", sorted(SPECIAL_CONVOLUTIONS))
def test_conv2d_and_gradients_match_cpu_on_special_shapes(case):
    x_shape, w_shape, stride, padding = SPECIAL_CONVOLUTIONS[case]
    x = random_array(x_shape, np.float32, seed=7, low=-1, high=1)
    w = random_array(w_shape, np.float32, seed=8, low=-1, high=1)
    conv = lambda a, b: tf.nn.conv2d(a, b, stride, padding)
    tol = conv_tolerance(np.float32)
    assert_matches_cpu(conv, x, w, expect_launch=x.size > 0, **tol)
    assert_gradients_match_cpu(conv, x, w, **tol)


def test_conv2d_filter_gradient_summed_over_several_im2col_chunks_matches_cpu():
    # 256 output rows of 64 pixels x 576 patch values exceed the kernel's 8M-element im2col
    # buffer, so the gradient is accumulated over two chunks.
    x = random_array((4, 64, 64, 64), np.float32, seed=46, low=-1, high=1)
    dy = random_array((4, 64, 64, 8), np.float32, seed=47, low=-1, high=1)
    backprop = lambda a, g: tf.raw_ops.Conv2DBackpropFilter(
        input=a, filter_sizes=[3, 3, 64, 8], out_backprop=g, strides=[1, 1, 1, 1],
        padding="SAME")
    assert_matches_cpu(backprop, x, dy, rtol=1e-4, atol=1e-3)


def test_conv2d_of_empty_input_with_padding_is_zero():
    x = np.zeros((2, 0, 3, 2), np.float32)
    w = random_array((3, 3, 2, 4), np.float32, seed=9)
    conv = lambda a, b: tf.nn.conv2d(a, b, 1, [[0, 0], [2, 2], [1, 1], [0, 0]])
    actual = assert_matches_cpu(conv, x, w)
    assert actual.shape == (2, 2, 3, 4) and not np.any(actual.numpy())


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64])
def test_conv2d_and_gradients_match_cpu_in_other_dtypes(dtype):
    x = random_array((2, 6, 7, 3), dtype, seed=10, low=-1, high=1)
    w = random_array((3, 3, 3, 4), dtype, seed=11, low=-1, high=1)
    conv = lambda a, b: tf.nn.conv2d(a, b, 1, "SAME")
    if dtype is BF16 and not _cpu_has_native_bfloat16():
        # Without AVX512-BF16 TensorFlow's CPU bfloat16 gradient kernels accumulate in bfloat16
        # (errors up to 0.33 against float64 on these inputs, the virtual GPU's 0.07): compare
        # both directions with the float64 result instead.
        for fn in (conv, gradients_of(conv)):
            exact = tf.nest.flatten(run_on("/CPU:0", fn, x.astype(np.float64), w.astype(np.float64)))
            actual = tf.nest.flatten(run_on("/GPU:0", fn, x, w))
            for e, a in zip(exact, actual):
                np.testing.assert_allclose(a.numpy().astype(np.float64), e.numpy(),
                                           **conv_tolerance(dtype))
        return
    assert_matches_cpu(conv, x, w, **conv_tolerance(dtype))
    assert_gradients_match_cpu(conv, x, w, **conv_tolerance(dtype))


def _cpu_has_native_bfloat16():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return True


DEPTHWISE_CASES = [
    pytest.param(padding, stride, multiplier, id=f"{padding}-stride{stride}-multiplier{multiplier}")
    for padding in ("valid", "same", "explicit")
    for stride in (1, 2)
    for multiplier in (1, 2)
] + [
    # Unequal strides: TensorFlow's GPU kernel refuses them, its CPU kernel computes them (so
    # does the plugin: Keras' DepthwiseConv2D(strides=(2, 1)) trains on the CPU).
    pytest.param(padding, stride, 2, id=f"{padding}-stride{stride[0]}x{stride[1]}-multiplier2")
    for padding in ("valid", "same")
    for stride in ((2, 1), (1, 3))
]


def depthwise_ops(data_format, stride, padding, x_shape, w_shape, dilation=1):
    """Forward, backprop-input and backprop-filter depthwise functions in `data_format`."""
    attributes = conv_attributes(data_format, stride, dilation, padding)
    forward = lambda x, w: tf.raw_ops.DepthwiseConv2dNative(input=x, filter=w, **attributes)
    backprop_input = lambda w, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
        input_sizes=shape_in_format(x_shape, data_format), filter=w, out_backprop=dy,
        **attributes)
    backprop_filter = lambda x, dy: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=x, filter_sizes=list(w_shape), out_backprop=dy, **attributes)
    return forward, backprop_input, backprop_filter


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("padding,stride,multiplier", DEPTHWISE_CASES)
def test_depthwise_conv2d_and_backprops_match_cpu(data_format, padding, stride, multiplier):
    x_shape, w_shape = (2, 7, 8, 3), (3, 2, 3, multiplier)
    x = random_array(x_shape, np.float32, seed=12, low=-1, high=1)
    w = random_array(w_shape, np.float32, seed=13, low=-1, high=1)
    cpu = depthwise_ops("NHWC", stride, padding, x_shape, w_shape)
    gpu = depthwise_ops(data_format, stride, padding, x_shape, w_shape)
    y = on_device("/CPU:0", cpu[0], x, w)
    dy = random_array(y.shape, np.float32, seed=14, low=-1, high=1)
    y_gpu = on_device("/GPU:0", gpu[0], to_format(x, data_format), w)
    assert_close(from_format(y_gpu, data_format), y, np.float32)
    dx = on_device("/GPU:0", gpu[1], w, to_format(dy, data_format))
    assert_close(from_format(dx, data_format), on_device("/CPU:0", cpu[1], w, dy), np.float32)
    dw = on_device("/GPU:0", gpu[2], to_format(x, data_format), to_format(dy, data_format))
    assert_close(dw, on_device("/CPU:0", cpu[2], x, dy), np.float32)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("stride", [1, 2])
def test_dilated_depthwise_conv2d_matches_block_diagonal_conv2d(data_format, stride):
    # TensorFlow's own depthwise kernels reject dilations; the plugin's follow Conv2D's rule.
    # Reference: a Conv2D on the CPU whose filter maps channel c only to outputs c*m..c*m+m-1.
    x_shape, w_shape = (2, 9, 8, 3), (3, 2, 3, 2)
    x = random_array(x_shape, np.float32, seed=15, low=-1, high=1)
    w = random_array(w_shape, np.float32, seed=16, low=-1, high=1)
    full = np.zeros((3, 2, 3, 6), np.float32)
    for c in range(3):
        full[:, :, c, 2 * c:2 * c + 2] = w[:, :, c, :]
    attributes = conv_attributes("NHWC", stride, 2, "same")
    conv = lambda a, b: tf.raw_ops.Conv2D(input=a, filter=b, **attributes)
    y = on_device("/CPU:0", conv, x, full)
    dy = random_array(y.shape, np.float32, seed=17, low=-1, high=1)
    dx = on_device("/CPU:0", lambda b, g: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=list(x_shape), filter=b, out_backprop=g, **attributes), full, dy)
    dfull = on_device("/CPU:0", lambda a, g: tf.raw_ops.Conv2DBackpropFilter(
        input=a, filter_sizes=[3, 2, 3, 6], out_backprop=g, **attributes), x, dy)
    dw = np.stack([dfull[:, :, c, 2 * c:2 * c + 2] for c in range(3)], axis=2)

    gpu = depthwise_ops(data_format, stride, "same", x_shape, w_shape, dilation=2)
    y_gpu = on_device("/GPU:0", gpu[0], to_format(x, data_format), w)
    assert_close(from_format(y_gpu, data_format), y, np.float32)
    dx_gpu = on_device("/GPU:0", gpu[1], w, to_format(dy, data_format))
    assert_close(from_format(dx_gpu, data_format), dx, np.float32)
    dw_gpu = on_device("/GPU:0", gpu[2], to_format(x, data_format), to_format(dy, data_format))
    assert_close(dw_gpu, dw, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64])
def test_depthwise_conv2d_gradients_match_cpu(dtype):
    x = random_array((2, 6, 5, 4), dtype, seed=18, low=-1, high=1)
    w = random_array((3, 3, 4, 2), dtype, seed=19, low=-1, high=1)
    conv = lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 1, 1, 1], "SAME")
    assert_matches_cpu(conv, x, w, **conv_tolerance(dtype))
    assert_gradients_match_cpu(conv, x, w, **conv_tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["forward", "backprop_input", "backprop_filter"])
@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_nchw_convolutions_in_16_bit_types_match_cpu(depthwise, op, dtype):
    # NCHW tensors are staged to NHWC float on the executor. Eigen evaluates
    # shuffle(...).cast<float>() blockwise by writing the shuffled 16-bit values straight into
    # the float buffer, which gave garbage (e.g. DepthwiseConv2dNativeBackpropFilter off by
    # hundreds in float16); the kernels now convert first and transpose after.
    x_shape, w_shape = (2, 7, 8, 3), (3, 2, 3, 2)
    x = random_array(x_shape, dtype, seed=48, low=-1, high=1)
    w = random_array(w_shape, dtype, seed=49, low=-1, high=1)
    attributes = lambda data_format: conv_attributes(data_format, 1, 1, "same")
    if depthwise:
        forward = lambda f: lambda a, b: tf.raw_ops.DepthwiseConv2dNative(
            input=a, filter=b, **attributes(f))
        backprop_input = lambda f: lambda b, g: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=shape_in_format(x_shape, f), filter=b, out_backprop=g, **attributes(f))
        backprop_filter = lambda f: lambda a, g: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
            input=a, filter_sizes=list(w_shape), out_backprop=g, **attributes(f))
    else:
        forward = lambda f: lambda a, b: tf.raw_ops.Conv2D(input=a, filter=b, **attributes(f))
        backprop_input = lambda f: lambda b, g: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=shape_in_format(x_shape, f), filter=b, out_backprop=g, **attributes(f))
        backprop_filter = lambda f: lambda a, g: tf.raw_ops.Conv2DBackpropFilter(
            input=a, filter_sizes=list(w_shape), out_backprop=g, **attributes(f))
    dy = random_array(on_device("/CPU:0", forward("NHWC"), x, w).shape, dtype, seed=50,
                      low=-1, high=1)
    if op == "forward":
        expected = on_device("/CPU:0", forward("NHWC"), x, w)
        actual = from_format(on_device("/GPU:0", forward("NCHW"), to_format(x, "NCHW"), w),
                             "NCHW")
    elif op == "backprop_input":
        expected = on_device("/CPU:0", backprop_input("NHWC"), w, dy)
        actual = from_format(on_device("/GPU:0", backprop_input("NCHW"), w,
                                       to_format(dy, "NCHW")), "NCHW")
    else:
        expected = on_device("/CPU:0", backprop_filter("NHWC"), x, dy)
        actual = on_device("/GPU:0", backprop_filter("NCHW"), to_format(x, "NCHW"),
                           to_format(dy, "NCHW"))
    assert_close(actual, expected, dtype)


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv2d", "depthwise"])
def test_convolutions_of_an_empty_batch_have_the_right_shapes_and_zero_filter_gradients(
        depthwise):
    # Compared with the expected shapes rather than the CPU: TensorFlow 2.21's oneDNN CPU
    # kernels return a result shaped like the input for an empty batch (its Eigen kernels and
    # the virtual GPU give [0, rows, cols, out_depth]).
    x = np.zeros((0, 6, 5, 3), np.float32)
    w = random_array((3, 3, 3, 2), np.float32, seed=20)
    conv = (lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 1, 1, 1], "SAME")) if depthwise else (
        lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"))

    def forward_and_gradients(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            y = conv(a, b)
        return (y,) + tuple(tape.gradient(y, [a, b], output_gradients=tf.ones_like(y)))

    y, dx, dw = on_device("/GPU:0", forward_and_gradients, x, w)
    assert y.shape == (0, 6, 5, 6 if depthwise else 2)
    assert dx.shape == x.shape
    assert dw.shape == w.shape and not np.any(dw)


def grouped_reference(groups, conv):
    """conv(x, w) of a grouped convolution computed group by group (TensorFlow's CPU kernels
    have no grouped gradients): the input's channels and the filter's output channels are split
    into `groups` parts, each convolved, and the results concatenated. NHWC."""

    def grouped(x, w):
        xs = tf.split(x, groups, axis=3)
        ws = tf.split(w, groups, axis=3)
        return tf.concat([conv(a, b) for a, b in zip(xs, ws)], axis=3)

    return grouped


def values_and_gradients(device, fn, *args):
    """fn(*args) and d(sum(fn(*args) * u))/d(args) on `device`, u a fixed random upstream
    gradient, as numpy arrays."""
    return on_device(device, gradients_of(fn, seed=98, with_values=True), *args)


GROUPED_CASES = [
    pytest.param(groups, padding, stride, dilation,
                 id=f"groups{groups}-{padding}-stride{stride}-dilation{dilation}")
    for groups, padding, stride, dilation in [
        (2, "valid", 1, 1), (2, "same", 2, 1), (3, "explicit", 1, 2), (3, "same", 2, 2),
        (6, "valid", 1, 1)]
]


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("groups,padding,stride,dilation", GROUPED_CASES)
def test_grouped_conv2d_and_gradients_match_per_group_convolutions_on_cpu(
        data_format, groups, padding, stride, dilation):
    # Input depth 6 = groups * filter in_channels; output depth 6 (a multiple of the groups).
    x = random_array((2, 7, 8, 6), np.float32, seed=51, low=-1, high=1)
    w = random_array((3, 2, 6 // groups, 6), np.float32, seed=52, low=-1, high=1)
    gpu_conv = lambda a, b: from_format_tensor(tf.raw_ops.Conv2D(
        input=to_format_tensor(a, data_format), filter=b,
        **conv_attributes(data_format, stride, dilation, padding)), data_format)
    # The CPU reference: dilated filters, since TensorFlow's CPU backprops reject dilations.
    cpu_conv = lambda a, b: tf.raw_ops.Conv2D(
        input=a, filter=b, **conv_attributes("NHWC", stride, 1, padding))
    vgpu.reset_stats()
    actual = values_and_gradients("/GPU:0", gpu_conv, x, w)
    assert vgpu.stats()["launches"] >= 3
    expected = values_and_gradients(
        "/CPU:0", lambda a, b: grouped_reference(groups, cpu_conv)(a, dilated_tensor(b, dilation)),
        x, w)
    for a, e in zip(actual, expected):
        assert_close(a, e, np.float32)


def to_format_tensor(t, data_format):
    return tf.transpose(t, (0, 3, 1, 2)) if data_format == "NCHW" else t


def from_format_tensor(t, data_format):
    return tf.transpose(t, (0, 2, 3, 1)) if data_format == "NCHW" else t


def dilated_tensor(w, dilation):
    """dilate_filter for tensors (differentiable)."""
    if dilation == 1:
        return w
    kh, kw = w.shape[:2]
    rows = []
    for i in range(kh):
        cols = []
        for j in range(kw):
            cols.append(w[i, j])
            if j < kw - 1:
                cols.extend([tf.zeros_like(w[i, j])] * (dilation - 1))
        rows.append(tf.stack(cols))
        if i < kh - 1:
            rows.extend([tf.zeros_like(rows[-1])] * (dilation - 1))
    return tf.stack(rows)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64])
def test_grouped_conv2d_and_gradients_match_cpu_in_other_dtypes(dtype):
    x = random_array((2, 6, 5, 4), dtype, seed=53, low=-1, high=1)
    w = random_array((3, 3, 2, 6), dtype, seed=54, low=-1, high=1)
    conv = lambda a, b: tf.nn.conv2d(a, b, 1, "SAME")
    actual = values_and_gradients("/GPU:0", conv, x, w)
    expected = values_and_gradients("/CPU:0", grouped_reference(2, conv), x, w)
    for a, e in zip(actual, expected):
        assert_close(a, e, dtype)


def test_grouped_conv2d_forward_matches_cpu_grouped_kernel():
    # TensorFlow's CPU Conv2D computes grouped convolutions itself (not their gradients).
    x = random_array((2, 9, 7, 8), np.float32, seed=55, low=-1, high=1)
    w = random_array((3, 3, 2, 8), np.float32, seed=56, low=-1, high=1)
    assert_matches_cpu(lambda a, b: tf.nn.conv2d(a, b, 2, "SAME"), x, w,
                       **conv_tolerance(np.float32))


def test_depthwise_as_grouped_conv2d_with_one_channel_per_group_matches_depthwise():
    # groups == input depth: every output channel sees one input channel.
    x = random_array((2, 6, 6, 3), np.float32, seed=57, low=-1, high=1)
    w = random_array((3, 3, 3, 2), np.float32, seed=58, low=-1, high=1)
    grouped_filter = np.reshape(w, (3, 3, 1, 6))
    depthwise = on_device("/CPU:0", lambda a, b: tf.nn.depthwise_conv2d(a, b, [1] * 4, "SAME"),
                          x, w)
    grouped = on_device("/GPU:0", lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"), x,
                        grouped_filter)
    assert_close(grouped, depthwise, np.float32)


@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("padding,stride", [("valid", 1), ("same", 2), ("explicit", 1)])
def test_conv2d_backprop_v2_ops_match_the_cpu_backprops(data_format, groups, padding, stride):
    # The V2 ops take the input (filter) tensor instead of its sizes; TensorFlow has no kernel
    # for them, so they are compared with the CPU's V1 results (per group for grouped ones).
    x_shape, w_shape = (2, 7, 9, 4), (3, 2, 4 // groups, 4)
    x = random_array(x_shape, np.float32, seed=59, low=-1, high=1)
    w = random_array(w_shape, np.float32, seed=60, low=-1, high=1)
    dy = random_array(forward_shape(x_shape, (3, 2, 4, 4), stride, 1, padding), np.float32,
                      seed=61, low=-1, high=1)
    attributes = conv_attributes(data_format, stride, 1, padding)
    dx = on_device("/GPU:0", lambda a, b, g: tf.raw_ops.Conv2DBackpropInputV2(
        input=a, filter=b, out_backprop=g, **attributes), to_format(x, data_format), w,
        to_format(dy, data_format))
    dw = on_device("/GPU:0", lambda a, b, g: tf.raw_ops.Conv2DBackpropFilterV2(
        input=a, filter=b, out_backprop=g, **attributes), to_format(x, data_format), w,
        to_format(dy, data_format))
    cpu_attributes = conv_attributes("NHWC", stride, 1, padding)
    cpu_conv = lambda a, b: tf.raw_ops.Conv2D(input=a, filter=b, **cpu_attributes)
    _, expected_dx, expected_dw = on_device("/CPU:0", lambda a, b, g: vjp(
        grouped_reference(groups, cpu_conv), g, a, b), x, w, dy)
    assert_close(from_format(dx, data_format), expected_dx, np.float32)
    assert_close(dw, expected_dw, np.float32)


def vjp(fn, upstream, *args):
    with tf.GradientTape() as tape:
        for t in args:
            tape.watch(t)
        out = fn(*args)
    return (out,) + tuple(tape.gradient(out, args, output_gradients=upstream))


def generic_conv(channels_first, strides, padding, dilations=None, batch_dims=1,
                 explicit_paddings=()):
    """TensorFlow's generic Conv op on channels-last tensors, computed channels first when
    asked (TensorFlow's CPU kernel takes CHANNELS_LAST only)."""
    def conv(x, w):
        rank = len(x.shape)
        first = list(range(batch_dims)) + [rank - 1] + list(range(batch_dims, rank - 1))
        last = list(range(batch_dims)) + list(range(batch_dims + 1, rank)) + [batch_dims]
        spatial = rank - 1 - batch_dims
        full = lambda values: ([1, 1] + values) if channels_first else ([1] + values + [1])
        y = tf.raw_ops.Conv(
            input=tf.transpose(x, first) if channels_first else x, filter=w,
            strides=full(strides), padding=padding,
            explicit_paddings=list(explicit_paddings),
            dilations=full(dilations or [1] * spatial),
            data_format="CHANNELS_FIRST" if channels_first else "CHANNELS_LAST",
            batch_dims=batch_dims)
        return tf.transpose(y, last) if channels_first else y
    return conv


@pytest.mark.parametrize("channels_first", [False, True], ids=["last", "first"])
@pytest.mark.parametrize("case", ["2d-same-strided", "2d-explicit", "2d-dilated-batch-dims",
                                  "3d-valid"])
def test_generic_conv_op_matches_cpu(channels_first, case):
    if case == "2d-same-strided":
        x_shape, w_shape, args = (2, 7, 8, 3), (3, 2, 3, 4), ([2, 1], "SAME")
        kwargs = {}
    elif case == "2d-explicit":
        x_shape, w_shape, args = (2, 7, 8, 3), (3, 3, 3, 4), ([1, 1], "EXPLICIT")
        kwargs = dict(explicit_paddings=[0, 0, 1, 2, 2, 0, 0, 0])
    elif case == "2d-dilated-batch-dims":
        x_shape, w_shape, args = (2, 3, 7, 8, 3), (3, 2, 3, 4), ([1, 1], "VALID")
        kwargs = dict(dilations=[2, 1], batch_dims=2)
    else:
        x_shape, w_shape, args = (2, 4, 5, 6, 3), (2, 3, 2, 3, 4), ([1, 2, 1], "VALID")
        kwargs = {}
    if channels_first and "explicit_paddings" in kwargs:
        p = kwargs["explicit_paddings"]
        kwargs = dict(kwargs, explicit_paddings=p[0:2] + p[6:8] + p[2:6])
    x = random_array(x_shape, np.float32, seed=64, low=-1, high=1)
    w = random_array(w_shape, np.float32, seed=65, low=-1, high=1)
    cpu_kwargs = dict(kwargs, explicit_paddings=[0, 0, 1, 2, 2, 0, 0, 0]) if (
        case == "2d-explicit") else kwargs
    expected = on_device("/CPU:0", generic_conv(False, *args, **cpu_kwargs), x, w)
    vgpu.reset_stats()
    actual = on_device("/GPU:0", generic_conv(channels_first, *args, **kwargs), x, w)
    assert vgpu.stats()["launches"] >= 1
    assert_close(actual, expected, np.float32)


def test_generic_conv_op_rejects_groups_and_other_spatial_ranks():
    x, w = np.ones((1, 5, 5, 4), np.float32), np.ones((3, 3, 2, 2), np.float32)
    _raises_on_gpu(lambda a, b: tf.raw_ops.Conv(input=a, filter=b, strides=[1, 1, 1, 1],
                                                padding="SAME", groups=2),
                   x, w, error=tf.errors.UnimplementedError, match="Grouped")
    _raises_on_gpu(lambda a, b: tf.raw_ops.Conv(input=a, filter=b, strides=[1, 1, 1, 1],
                                                padding="SAME", batch_dims=2),
                   x, w, match="2 or 3 spatial dimensions")
    _raises_on_gpu(lambda a, b: tf.raw_ops.Conv(input=a, filter=b, strides=[1, 1, 1, 1],
                                                padding="SAME"),
                   x, w, match="equal to filter depth")


MATMUL_DTYPES = [np.float32, np.float64, np.float16, BF16]


@pytest.mark.parametrize("dtype", MATMUL_DTYPES)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_matches_cpu(dtype, transpose_a, transpose_b):
    a = random_array((7, 5) if transpose_a else (5, 7), dtype, seed=21, low=-1, high=1)
    b = random_array((3, 7) if transpose_b else (7, 3), dtype, seed=22, low=-1, high=1)
    matmul = lambda x, y: tf.linalg.matmul(x, y, transpose_a=transpose_a,
                                           transpose_b=transpose_b)
    assert_matches_cpu(matmul, a, b, **conv_tolerance(dtype))


@pytest.mark.parametrize("shapes", [((130, 70), (70, 90)), ((0, 3), (3, 4)), ((3, 0), (0, 4)),
                                    ((1, 1), (1, 1))])
def test_matmul_of_large_small_and_empty_matrices_matches_cpu(shapes):
    a = random_array(shapes[0], np.float32, seed=23, low=-1, high=1)
    b = random_array(shapes[1], np.float32, seed=24, low=-1, high=1)
    out = assert_matches_cpu(tf.linalg.matmul, a, b, expect_launch=a.shape[0] > 0,
                             rtol=1e-5, atol=1e-5)
    if a.shape[1] == 0:
        assert not np.any(out.numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_matmul_gradients_match_cpu(dtype):
    a = random_array((6, 4), dtype, seed=25, low=-1, high=1)
    b = random_array((4, 5), dtype, seed=26, low=-1, high=1)
    assert_gradients_match_cpu(tf.linalg.matmul, a, b, **conv_tolerance(dtype))


@pytest.mark.parametrize("shapes", [((2, 1, 3, 4), (3, 4, 5)), ((4, 3, 4), (4, 5)),
                                    ((2, 80, 70), (2, 70, 60)), ((0, 3, 4), (1, 4, 2))],
                         ids=["broadcast", "shared-rhs", "large", "empty-batch"])
@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
def test_batch_matmul_v2_matches_cpu(shapes, adj_x, adj_y):
    a_shape, b_shape = list(shapes[0]), list(shapes[1])
    if adj_x:
        a_shape[-2:] = a_shape[-1:-3:-1]
    if adj_y:
        b_shape[-2:] = b_shape[-1:-3:-1]
    a = random_array(a_shape, np.float32, seed=27, low=-1, high=1)
    b = random_array(b_shape, np.float32, seed=28, low=-1, high=1)
    batch_matmul = lambda x, y: tf.raw_ops.BatchMatMulV2(x=x, y=y, adj_x=adj_x, adj_y=adj_y)
    assert_matches_cpu(batch_matmul, a, b, expect_launch=a.size > 0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", MATMUL_DTYPES)
@pytest.mark.parametrize("shapes", [((2, 1, 3, 4), (3, 4, 5)), ((4, 3, 4), (4, 5)),
                                    ((0, 3, 4), (1, 4, 2))],
                         ids=["broadcast", "shared-rhs", "empty-batch"])
@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, True)])
def test_batch_matmul_v3_matches_cpu(dtype, shapes, adj_x, adj_y):
    a_shape, b_shape = list(shapes[0]), list(shapes[1])
    if adj_x:
        a_shape[-2:] = a_shape[-1:-3:-1]
    if adj_y:
        b_shape[-2:] = b_shape[-1:-3:-1]
    a = random_array(a_shape, dtype, seed=62, low=-1, high=1)
    b = random_array(b_shape, dtype, seed=63, low=-1, high=1)
    batch_matmul = lambda x, y: tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=x.dtype, adj_x=adj_x,
                                                         adj_y=adj_y)
    assert_matches_cpu(batch_matmul, a, b, expect_launch=a.size > 0, **conv_tolerance(dtype))
    if a.size > 0:
        assert_gradients_match_cpu(batch_matmul, a, b, **conv_tolerance(dtype))


def test_batch_matmul_v3_with_mismatched_batches_is_an_invalid_argument():
    _raises_on_gpu(lambda x, y: tf.raw_ops.BatchMatMulV3(x=x, y=y, Tout=tf.float32),
                   np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32),
                   match="compatible batch dimensions")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4), (2, 3, 4, 5), (2, 3, 2, 2, 3), (0, 3, 2)])
def test_bias_add_and_grad_match_cpu(shape, data_format, dtype):
    channels = shape[1] if data_format == "NCHW" else shape[-1]
    value = random_array(shape, dtype, seed=29)
    bias = random_array((channels,), dtype, seed=30)
    add = lambda v, b: tf.nn.bias_add(v, b, data_format=data_format)
    grad = lambda g: tf.raw_ops.BiasAddGrad(out_backprop=g, data_format=data_format)
    assert_matches_cpu(add, value, bias, expect_launch=value.size > 0)
    assert_matches_cpu(grad, value, **conv_tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(8, 40, 40, 16), (3000, 7), (5, 1), (40, 603), (3, 5000)])
def test_bias_add_grad_over_many_row_blocks_matches_cpu(shape, dtype):
    """NHWC bias gradients are summed in blocks of ~64 KiB of rows (8x40x40x16 floats: 13
    blocks; 3000x7: 2), each into its own partial, then added in order. float16 rows are
    converted several rows at a time when a row has at most 4096 columns (40x603: six rows a
    conversion, the last one partial), else 4096 columns at a time (3x5000)."""
    grad = lambda g: tf.raw_ops.BiasAddGrad(out_backprop=g, data_format="NHWC")
    value = random_array(shape, dtype, seed=35)
    assert_matches_cpu(grad, value, **conv_tolerance(dtype))
    with tf.device("/GPU:0"):
        first = grad(tf.constant(value)).numpy()
        again = grad(tf.constant(value)).numpy()
    np.testing.assert_array_equal(first, again)  # the same blocks, the same order


@pytest.mark.parametrize("dtype", [np.float16, BF16])
@pytest.mark.parametrize("data_format", FORMATS)
@pytest.mark.parametrize("shape", [(3, 37, 41, 29), (2, 5000, 3), (9, 4100), (2, 3, 1500, 2)])
def test_sixteen_bit_bias_add_is_bit_identical_to_cpu_across_runs(shape, data_format, dtype):
    """16-bit BiasAdd adds in float32 in runs of 4096 elements and rounds once: the bits
    TensorFlow-CPU's kernel gives, with runs that end mid-row (NHWC) and mid-channel (NCHW)."""
    channels = shape[1] if data_format == "NCHW" else shape[-1]
    value = random_array(shape, dtype, seed=36, low=-300, high=300)
    bias = random_array((channels,), dtype, seed=37, low=-3, high=3)
    add = lambda v, b: tf.nn.bias_add(v, b, data_format=data_format)
    actual = run_on("/GPU:0", add, value, bias).numpy()
    expected = run_on("/CPU:0", add, value, bias).numpy()
    np.testing.assert_array_equal(actual.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("shape", [(8, 40, 40, 16), (40, 603), (3, 5000)])
def test_bfloat16_bias_add_grad_over_many_row_blocks_is_the_float_sum_rounded(shape):
    """bfloat16 bias gradients are summed in float32 (converted 256 columns at a time) and
    rounded once: within bfloat16's rounding of the exact sum. (TensorFlow-CPU's bfloat16
    kernel is not: 23 off a sum of 455 over these 12 800 rows, so it is not the reference.)"""
    grad = lambda g: tf.raw_ops.BiasAddGrad(out_backprop=g, data_format="NHWC")
    value = random_array(shape, BF16, seed=38)
    exact = value.astype(np.float64).reshape(-1, shape[-1]).sum(axis=0)
    actual = run_on("/GPU:0", grad, value).numpy().astype(np.float64)
    np.testing.assert_allclose(actual, exact, rtol=2.0**-8, atol=1e-3)


def test_bias_add_gradients_match_cpu():
    value = random_array((3, 4, 5), np.float32, seed=31)
    bias = random_array((5,), np.float32, seed=32)
    assert_gradients_match_cpu(tf.nn.bias_add, value, bias)


def test_bias_add_v1_matches_cpu():
    value = random_array((3, 4), np.float32, seed=33)
    bias = random_array((4,), np.float32, seed=34)
    assert_matches_cpu(lambda v, b: tf.raw_ops.BiasAddV1(value=v, bias=b), value, bias)


def fused_conv2d(x, w, bias, fused_ops, data_format="NHWC"):
    """TensorFlow's internal _FusedConv2D (what Grappler's remapper makes of Conv2D + BiasAdd
    + activation), executed eagerly."""
    attributes = ("T", x.dtype.as_datatype_enum, "num_args", 1,
                  "TArgs", [bias.dtype.as_datatype_enum], "num_host_args", 0,
                  "strides", shape_in_format([1, 2, 2, 1], data_format), "padding", "SAME",
                  "explicit_paddings", [], "data_format", data_format, "filter_format", "HWIO",
                  "dilations", [1, 1, 1, 1],
                  "use_cudnn_on_gpu", True, "fused_ops", fused_ops, "epsilon", 1e-4,
                  "leakyrelu_alpha", 0.2)
    return execute.execute("_FusedConv2D", 1, inputs=[x, w, bias], attrs=attributes,
                           ctx=context.context())[0]


def fused_matmul(a, b, bias, fused_ops):
    """TensorFlow's internal _FusedMatMul, executed eagerly."""
    attributes = ("T", a.dtype.as_datatype_enum, "transpose_a", False, "transpose_b", True,
                  "num_args", 1, "fused_ops", fused_ops, "epsilon", 1e-4, "leakyrelu_alpha", 0.2)
    return execute.execute("_FusedMatMul", 1, inputs=[a, b, bias], attrs=attributes,
                           ctx=context.context())[0]


@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"]],
                         ids=lambda ops: "+".join(ops))
def test_fused_conv2d_matches_cpu(fused_ops):
    x = random_array((2, 7, 8, 3), np.float32, seed=37, low=-2, high=2)
    w = random_array((3, 3, 3, 4), np.float32, seed=38, low=-2, high=2)
    bias = random_array((4,), np.float32, seed=39)
    vgpu.reset_stats()
    assert_matches_cpu(lambda *t: fused_conv2d(*t, fused_ops), x, w, bias,
                       **conv_tolerance(np.float32))
    assert vgpu.stats()["launches"] == 1
    # NCHW (what the layout optimizer makes of it) against the NHWC result.
    expected = on_device("/CPU:0", lambda *t: fused_conv2d(*t, fused_ops), x, w, bias)
    actual = on_device("/GPU:0", lambda *t: fused_conv2d(*t, fused_ops, "NCHW"),
                       to_format(x, "NCHW"), w, bias)
    assert_close(from_format(actual, "NCHW"), expected, np.float32)


@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Tanh"],
                                       ["BiasAdd", "Sigmoid"]], ids=lambda ops: "+".join(ops))
def test_fused_matmul_matches_cpu(fused_ops):
    a = random_array((5, 6), np.float32, seed=40)
    b = random_array((4, 6), np.float32, seed=41)
    bias = random_array((4,), np.float32, seed=42)
    assert_matches_cpu(lambda *t: fused_matmul(*t, fused_ops), a, b, bias, rtol=1e-5, atol=1e-5)


def test_unsupported_fusion_is_unimplemented():
    x, w, bias = X, W, np.ones((2,), np.float32)
    _raises_on_gpu(lambda *t: fused_conv2d(*t, ["BiasAdd", "Elu"]), x, w, bias,
                   error=tf.errors.UnimplementedError, match="Unsupported fusion")


def test_graph_conv2d_bias_relu_is_fused_into_one_launch_and_matches_cpu():
    # Grappler's remapper turns Conv2D + BiasAdd + Relu on a GPU into _FusedConv2D. (Its layout
    # optimizer, which would move the convolution to NCHW, is switched off for this test.)
    x = random_array((2, 8, 8, 3), np.float32, seed=43, low=-1, high=1)
    w = random_array((3, 3, 3, 4), np.float32, seed=44, low=-1, high=1)
    bias = random_array((4,), np.float32, seed=45)

    @tf.function
    def conv_bias_relu(x, w, b):
        return tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b))

    saved = tf.config.optimizer.get_experimental_options().get("layout_optimizer", True)
    tf.config.optimizer.set_experimental_options({"layout_optimizer": False})
    try:
        expected = on_device("/CPU:0", conv_bias_relu, x, w, bias)
        vgpu.reset_stats()
        actual = on_device("/GPU:0", conv_bias_relu, x, w, bias)
        launches = vgpu.stats()["launches"]
    finally:
        tf.config.optimizer.set_experimental_options({"layout_optimizer": saved})
    assert_close(actual, expected, np.float32)
    assert launches == 1


def _raises_on_gpu(fn, *args, error=tf.errors.InvalidArgumentError, match=None):
    with tf.device("/GPU:0"), pytest.raises(error, match=match) as info:
        fn(*[tf.constant(a) for a in args])
    assert "GPU:0" in str(info.value), "the error did not come from the virtual GPU's kernel"


X = np.ones((1, 5, 5, 4), np.float32)
W = np.ones((3, 3, 4, 2), np.float32)
BAD_CONVOLUTIONS = {
    "depth-not-divisible": (lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w[:, :, :3], strides=[1, 1, 1, 1], padding="SAME"),
        "evenly divisible"),
    "depthwise-batch-stride": (lambda x, w: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=w, strides=[2, 1, 1, 2], padding="SAME"), "batch and depth"),
    "grouped-output-depth": (lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=tf.ones([3, 3, 2, 3]), strides=[1, 1, 1, 1], padding="SAME"),
        "divisible by number of groups"),
    "backprop-filter-grouped-output-depth": (lambda x, w: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=[3, 3, 2, 3], out_backprop=tf.ones([1, 5, 5, 3]),
        strides=[1, 1, 1, 1], padding="SAME"), "divisible by number of groups"),
    "backprop-batch-mismatch": (lambda x, w: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=[3, 3, 4, 2], out_backprop=tf.ones([2, 5, 5, 2]),
        strides=[1, 1, 1, 1], padding="SAME"), "same batch size"),
    "backprop-input-v2-depth": (lambda x, w: tf.raw_ops.Conv2DBackpropInputV2(
        input=x, filter=w[:, :, :3], out_backprop=tf.ones([1, 5, 5, 2]),
        strides=[1, 1, 1, 1], padding="SAME"), "evenly divisible"),
    "zero-stride": (lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w, strides=[1, 0, 1, 1], padding="SAME"), "larger than 0"),
    "zero-dilation": (lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w, strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 0, 1, 1]),
        "larger than 0"),
    "rank-3-input": (lambda x, w: tf.raw_ops.Conv2D(
        input=x[0], filter=w, strides=[1, 1, 1, 1], padding="SAME"), "4-dimensional"),
    "filter-larger-than-input": (lambda x, w: tf.raw_ops.Conv2D(
        input=x[:, :1, :1], filter=w, strides=[1, 1, 1, 1], padding="VALID"), "negative"),
    "explicit-paddings-count": (lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w, strides=[1, 1, 1, 1], padding="EXPLICIT",
        explicit_paddings=[0, 0, 1, 1, 1, 1]), "explicit_paddings"),
    "backprop-input-size-mismatch": (lambda x, w: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=[1, 5, 5, 4], filter=w, out_backprop=tf.ones([1, 4, 4, 2]),
        strides=[1, 1, 1, 1], padding="SAME"), "doesn't match"),
    "backprop-filter-sizes-rank": (lambda x, w: tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=[[3, 3, 4, 2]], out_backprop=tf.ones([1, 5, 5, 2]),
        strides=[1, 1, 1, 1], padding="SAME"), "1-dim"),
    "depthwise-depth-mismatch": (lambda x, w: tf.raw_ops.DepthwiseConv2dNative(
        input=x, filter=w[:, :, :2], strides=[1, 1, 1, 1], padding="SAME"), "same depth"),
    "matmul-incompatible": (lambda x, w: tf.linalg.matmul(
        tf.reshape(x, [5, 20]), tf.reshape(w, [36, 2])), "size-incompatible"),
    "batch-matmul-batch-mismatch": (lambda x, w: tf.raw_ops.BatchMatMulV2(
        x=tf.ones([2, 3, 4]), y=tf.ones([3, 4, 5])), "compatible batch dimensions"),
    "bias-size": (lambda x, w: tf.nn.bias_add(x, tf.ones([3])), "as many biases"),
    "bias-rank-1-value": (lambda x, w: tf.nn.bias_add(x[0, 0, 0], tf.ones([4])), "at least 2D"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONVOLUTIONS))
def test_invalid_arguments_are_invalid_argument_errors(case):
    fn, match = BAD_CONVOLUTIONS[case]
    _raises_on_gpu(fn, X, W, match=match)


# TensorFlow's Conv2D and Conv2DBackprop* kernels report batch or depth strides and dilations
# as Unimplemented (InitConv2DParameters, Conv2DBackprop*Op).
UNIMPLEMENTED_CONVOLUTIONS = {
    "conv2d-batch-stride": lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w, strides=[2, 1, 1, 1], padding="SAME"),
    "conv2d-depth-dilation": lambda x, w: tf.raw_ops.Conv2D(
        input=x, filter=w, strides=[1, 1, 1, 1], dilations=[1, 1, 1, 2], padding="SAME"),
    "backprop-input-batch-stride": lambda x, w: tf.raw_ops.Conv2DBackpropInput(
        input_sizes=[1, 5, 5, 4], filter=w, out_backprop=tf.ones([1, 5, 5, 2]),
        strides=[2, 1, 1, 1], padding="SAME"),
    "backprop-filter-v2-batch-dilation": lambda x, w: tf.raw_ops.Conv2DBackpropFilterV2(
        input=x, filter=w, out_backprop=tf.ones([1, 5, 5, 2]), strides=[1, 1, 1, 1],
        dilations=[2, 1, 1, 1], padding="SAME"),
}


@pytest.mark.parametrize("case", sorted(UNIMPLEMENTED_CONVOLUTIONS))
def test_batch_and_depth_strides_and_dilations_are_unimplemented(case):
    _raises_on_gpu(UNIMPLEMENTED_CONVOLUTIONS[case], X, W, error=tf.errors.UnimplementedError,
                   match="batch and depth dimensions")


def test_convolution_kernels_use_descriptors_created_and_destroyed_per_call():
    x = random_array((1, 6, 6, 2), np.float32, seed=35)
    w = random_array((3, 3, 2, 3), np.float32, seed=36)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.nn.conv2d(x, w, 1, "SAME").numpy()
        tf.linalg.matmul(x[0, 0], w[0, 0]).numpy()
    calls = vgpu.stats()["descriptor_calls"]
    for kind in ("tensor", "filter", "convolution", "matmul"):
        assert calls[kind]["create"] == calls[kind]["destroy"] == calls[kind]["set"] >= 1, kind
