"""Colour image ops on the virtual GPU against TensorFlow's CPU kernels: AdjustContrastv2,
AdjustHue and AdjustSaturation (float32 bit-exact; float16, which TensorFlow only has on GPUs,
against the CPU's float32 result), RGBToHSV and HSVToRGB (every registered dtype, bit-exact) with
the RGBToHSV gradient, tf.image's public wrappers, empty shapes, TensorFlow's GPU behaviour where
its CPU kernel differs, and TensorFlow's error classes and messages for bad inputs."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array, run_on

EXACT = dict(rtol=0, atol=0)
HALF = dict(rtol=1e-2, atol=1e-2)
BFLOAT16 = tf.bfloat16.as_numpy_dtype
IMAGE_SHAPES = [(2, 5, 7, 3), (1, 1, 1, 3), (3, 4, 4, 3), (2, 2, 3, 4, 3), (1, 33, 17, 3)]


def rgb(shape, seed=0, low=0.0, high=1.0):
    """Colours in [low, high) with exact ties and greys mixed in (the hue's special cases)."""
    pixels = random_array(shape, np.float32, seed=seed, low=low, high=high).reshape(-1, 3)
    pixels[::7, 1] = pixels[::7, 0]           # red == green
    pixels[3::11] = pixels[3::11, :1]         # grey
    pixels[5::13, 2] = pixels[5::13, 0]       # red == blue
    return pixels.reshape(shape)


def matches_cpu_in_float32(fn, image, dtype, **tol):
    """fn on the virtual GPU at `dtype` against TensorFlow's CPU at float32 (which has no kernel
    for `dtype`), the CPU result rounded to `dtype`."""
    expected = run_on("/CPU:0", fn, image.astype(np.float32)).numpy().astype(dtype)
    vgpu.reset_stats()
    actual = run_on("/GPU:0", fn, image.astype(dtype))
    assert actual.device.endswith("GPU:0") and actual.dtype == dtype
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_allclose(actual.numpy().astype(np.float64),
                               expected.astype(np.float64), **tol)


def raises_like_cpu(error, match, fn, *args):
    for device in ("/CPU:0", "/GPU:0"):
        with pytest.raises(error, match=match):
            run_on(device, fn, *args)


# --- AdjustContrastv2 ------------------------------------------------------------------------

def contrast(factor):
    return lambda x: tf.raw_ops.AdjustContrastv2(images=x, contrast_factor=factor)


@pytest.mark.parametrize("factor", [0.5, 2.0, -1.25])
@pytest.mark.parametrize("shape", IMAGE_SHAPES)
def test_adjust_contrast_matches_cpu_exactly(shape, factor):
    assert_matches_cpu(contrast(factor), rgb(shape, seed=1, low=-2, high=3), **EXACT)


@pytest.mark.parametrize("channels", [1, 4])
def test_adjust_contrast_of_any_channel_count_matches_cpu_exactly(channels):
    image = random_array((2, 9, 6, channels), np.float32, seed=2)
    assert_matches_cpu(contrast(1.7), image, **EXACT)


@pytest.mark.parametrize("shape", IMAGE_SHAPES)
def test_adjust_contrast_in_float16_matches_the_cpus_float32(shape):
    matches_cpu_in_float32(contrast(1.5), rgb(shape, seed=3), np.float16, **HALF)


def test_tf_image_adjust_contrast_matches_cpu():
    image = rgb((2, 6, 5, 3), seed=4)
    assert_matches_cpu(lambda x: tf.image.adjust_contrast(x, 0.4), image, **EXACT)


# --- AdjustHue and AdjustSaturation -----------------------------------------------------------

def hue(delta):
    return lambda x: tf.raw_ops.AdjustHue(images=x, delta=delta)


def saturation(scale):
    return lambda x: tf.raw_ops.AdjustSaturation(images=x, scale=scale)


@pytest.mark.parametrize("delta", [-0.9, -0.25, 0.0, 0.3, 1.0])
@pytest.mark.parametrize("shape", IMAGE_SHAPES)
def test_adjust_hue_matches_cpu_exactly(shape, delta):
    assert_matches_cpu(hue(delta), rgb(shape, seed=5), **EXACT)


def test_adjust_hue_of_colours_with_a_positive_maximum_matches_cpu_exactly():
    # Channels below 0 or above 1 keep their range as long as the largest channel is positive.
    image = rgb((4, 8, 8, 3), seed=6, low=-1.5, high=2.5)
    image.reshape(-1, 3)[:, 0] = np.abs(image.reshape(-1, 3)[:, 0]) + 0.01
    assert_matches_cpu(hue(0.37), image, **EXACT)


def test_adjust_hue_greys_a_colour_whose_largest_channel_is_not_positive_like_tensorflows_gpu():
    # TensorFlow's CPU kernel rotates such a colour; its GPU kernel (HSV with saturation 0 where
    # the value is <= 0) returns it grey at its largest channel, and so does the virtual GPU.
    image = np.array([[[[-0.5, -0.2, -0.1], [0.0, -0.4, -0.3], [0.2, -0.1, 0.5]]]], np.float32)
    out = run_on("/GPU:0", hue(0.25), image).numpy()
    np.testing.assert_array_equal(out[0, 0, 0], np.full(3, -0.1, np.float32))
    np.testing.assert_array_equal(out[0, 0, 1], [0.0, 0.0, 0.0])
    cpu = run_on("/CPU:0", hue(0.25), image).numpy()
    assert not np.array_equal(cpu[0, 0, 0], out[0, 0, 0])
    np.testing.assert_array_equal(out[0, 0, 2], cpu[0, 0, 2])


def test_adjust_hue_by_a_huge_or_infinite_delta_ends():
    # TensorFlow's CPU kernel steps the hue back by whole circles and never ends on these; the
    # virtual GPU reduces it first. A huge delta is still a rotation: every colour keeps its
    # largest and smallest channel.
    image = rgb((1, 3, 3, 3), seed=7)
    rotated = run_on("/GPU:0", hue(1e9), image).numpy()
    np.testing.assert_array_equal(rotated.max(axis=-1), image.max(axis=-1))
    np.testing.assert_array_equal(rotated.min(axis=-1), image.min(axis=-1))
    assert run_on("/GPU:0", hue(float("inf")), image).shape == image.shape


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0, 1.7, 4.0])
@pytest.mark.parametrize("shape", IMAGE_SHAPES)
def test_adjust_saturation_matches_cpu_exactly(shape, scale):
    assert_matches_cpu(saturation(scale), rgb(shape, seed=8, low=-0.5, high=1.5), **EXACT)


@pytest.mark.parametrize("op", [hue(0.3), saturation(1.6)])
def test_adjust_hue_and_saturation_in_float16_match_the_cpus_float32(op):
    matches_cpu_in_float32(op, rgb((2, 9, 7, 3), seed=9), np.float16, **HALF)


def test_tf_image_adjust_hue_and_saturation_match_cpu():
    image = rgb((2, 6, 5, 3), seed=10)
    assert_matches_cpu(lambda x: tf.image.adjust_hue(x, -0.4), image, **EXACT)
    assert_matches_cpu(lambda x: tf.image.adjust_saturation(x, 2.5), image, **EXACT)


def test_adjustments_of_empty_images_launch_nothing():
    image = np.zeros((0, 4, 4, 3), np.float32)
    for op in (contrast(2.0), hue(0.1), saturation(0.5)):
        out = assert_matches_cpu(op, image, expect_launch=False)
        assert out.shape == image.shape


@pytest.mark.parametrize("op,kwargs,match", [
    (tf.raw_ops.AdjustContrastv2, dict(images=np.zeros((4, 3), np.float32), contrast_factor=1.0),
     r"input must be at least 3-D, got shape\[4,3\]"),
    (tf.raw_ops.AdjustContrastv2,
     dict(images=np.zeros((1, 4, 3), np.float32), contrast_factor=np.ones(2, np.float32)),
     r"contrast_factor must be scalar: \[2\]"),
    (tf.raw_ops.AdjustHue, dict(images=np.zeros((2, 2, 4), np.float32), delta=0.1),
     "input must have 3 channels but instead has 4 channels."),
    (tf.raw_ops.AdjustHue, dict(images=np.zeros((2, 3), np.float32), delta=0.1),
     r"input must be at least 3-D, got shape\[2,3\]"),
    (tf.raw_ops.AdjustHue, dict(images=np.zeros((2, 2, 3), np.float32),
                                delta=np.ones(1, np.float32)), r"delta must be scalar: \[1\]"),
    (tf.raw_ops.AdjustSaturation, dict(images=np.zeros((2, 2, 2), np.float32), scale=0.1),
     "input must have 3 channels but instead has 2 channels."),
    (tf.raw_ops.AdjustSaturation, dict(images=np.zeros((2, 2, 3), np.float32),
                                       scale=np.ones((1, 1), np.float32)),
     r"scale must be scalar: \[1,1\]"),
])
def test_bad_adjustment_inputs_are_invalid_argument(op, kwargs, match):
    raises_like_cpu(tf.errors.InvalidArgumentError, match, lambda: op(**kwargs))


# --- RGBToHSV and HSVToRGB --------------------------------------------------------------------

COLOR_DTYPES = [np.float32, np.float64, np.float16, BFLOAT16]
COLOR_SHAPES = [(5, 3), (2, 4, 5, 3), (3,), (2, 1, 3, 6, 3)]


def hsv_values(shape, seed=0):
    """HSV triples: hues in [0, 1) and a few beyond (HSVToRGB does not wrap them), saturations
    and values in [0, 1] and a few beyond."""
    values = random_array(shape, np.float32, seed=seed, low=0.0, high=1.0).reshape(-1, 3)
    values[::5, 0] = np.linspace(-0.4, 1.6, len(values[::5]))
    values[2::9, 1:] *= 1.5
    return values.reshape(shape)


@pytest.mark.parametrize("shape", COLOR_SHAPES)
@pytest.mark.parametrize("dtype", COLOR_DTYPES)
def test_rgb_to_hsv_matches_cpu_exactly(dtype, shape):
    image = rgb(shape, seed=11, low=-0.2, high=1.2).astype(dtype)
    assert_matches_cpu(tf.image.rgb_to_hsv, image, **EXACT)


@pytest.mark.parametrize("shape", COLOR_SHAPES)
@pytest.mark.parametrize("dtype", COLOR_DTYPES)
def test_hsv_to_rgb_matches_cpu_exactly(dtype, shape):
    assert_matches_cpu(tf.image.hsv_to_rgb, hsv_values(shape, seed=12).astype(dtype), **EXACT)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rgb_hsv_round_trip_matches_cpu(dtype):
    image = rgb((3, 6, 6, 3), seed=13).astype(dtype)
    assert_matches_cpu(lambda x: tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(x)), image, **EXACT)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rgb_to_hsv_gradient_matches_cpu(dtype):
    # TensorFlow's Python gradient of RGBToHSV (piecewise: distinct channels, no greys).
    image = random_array((2, 5, 4, 3), dtype, seed=14, low=0.05, high=0.95)
    assert_gradients_match_cpu(tf.image.rgb_to_hsv, image)


def test_color_space_conversion_of_nothing_launches_nothing():
    for op in (tf.image.rgb_to_hsv, tf.image.hsv_to_rgb):
        out = assert_matches_cpu(op, np.zeros((0, 3), np.float32), expect_launch=False)
        assert out.shape == (0, 3)


@pytest.mark.parametrize("op", [tf.raw_ops.RGBToHSV, tf.raw_ops.HSVToRGB])
def test_bad_color_space_inputs_fail_like_cpu(op):
    raises_like_cpu(tf.errors.FailedPreconditionError,
                    "input must have 3 channels but input only has 4 channels.",
                    lambda: op(images=np.zeros((2, 4), np.float32)))
    raises_like_cpu(tf.errors.InvalidArgumentError, r"input must be at least 1D\[\]",
                    lambda: op(images=np.float32(1)))


def test_colour_ops_are_registered_for_tensorflows_gpu_dtypes():
    catalog = {entry["op"]: set(entry["dtypes"]) for entry in vgpu.ops()}
    for op in ("AdjustContrastv2", "AdjustHue", "AdjustSaturation"):
        assert catalog[op] == {"float32", "float16"}
    for op in ("RGBToHSV", "HSVToRGB"):
        assert catalog[op] == {"float32", "float64", "float16", "bfloat16"}


def test_ops_tensorflows_gpu_kernels_refuse_under_op_determinism_refuse_here_too():
    """AdjustContrastv2, CropAndResizeGradImage/GradBoxes and ResizeNearestNeighborGrad: TF's
    GPU kernels are Unimplemented while op determinism is required (TensorFlow's own
    image_ops_test checks it on a GPU); the virtual GPU's kernels are deterministic, but code
    written for a GPU expects the error. Outside determinism they run."""
    from tensorflow.python.framework import config  # noqa: PLC0415 - not in tf.config

    images = tf.ones([1, 4, 4, 3])
    grads = tf.ones([1, 2, 2, 3])
    boxes, box_index = tf.constant([[0.0, 0.0, 1.0, 1.0]]), tf.constant([0])
    calls = {
        "AdjustContrastv2": lambda: tf.raw_ops.AdjustContrastv2(images=images,
                                                                contrast_factor=2.0),
        "CropAndResizeBackpropImage": lambda: tf.raw_ops.CropAndResizeGradImage(
            grads=grads, boxes=boxes, box_ind=box_index, image_size=[1, 4, 4, 3], T=tf.float32),
        "CropAndResizeBackpropBoxes": lambda: tf.raw_ops.CropAndResizeGradBoxes(
            grads=grads, image=images, boxes=boxes, box_ind=box_index),
        "ResizeNearestNeighborGrad": lambda: tf.raw_ops.ResizeNearestNeighborGrad(
            grads=grads, size=[4, 4]),
    }
    config.enable_op_determinism()
    try:
        for name, call in calls.items():
            with tf.device("/GPU:0"), pytest.raises(tf.errors.UnimplementedError, match=name):
                call()
    finally:
        config.disable_op_determinism()
    for call in calls.values():
        with tf.device("/GPU:0"):
            call()
