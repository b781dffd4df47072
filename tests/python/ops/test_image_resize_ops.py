"""Image resizing on the virtual GPU against TensorFlow's CPU kernels: ResizeBilinear,
ResizeNearestNeighbor, ResizeBicubic, ResizeArea and ScaleAndTranslate for every registered image
dtype and every align_corners / half_pixel_centers (or kernel_type / antialias) combination, their
gradients (raw ops and through tf.image.resize), empty batches, TensorFlow's errors for bad
inputs, and the tf.image / Keras paths that feed them uint8 images."""
import re

import numpy as np
import pytest
import tensorflow as tf

import keras
import vgpu
from ops.op_testing import (assert_gradients_match_cpu, assert_matches_cpu, random_array,
                            run_on, strictly_on_gpu, tolerance)

R = tf.raw_ops
BF16 = tf.bfloat16.as_numpy_dtype
FLOATING = [np.float32, np.float64, np.float16, BF16]
INTEGERS = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.int64]
IMAGE_DTYPES = FLOATING + INTEGERS
EXACT = dict(rtol=0, atol=0)
# Interpolated values are float32 sums of products. With this project's default (portable) build
# they equal TensorFlow's CPU results bit for bit; a build for a CPU with FMA may fuse a product
# into a sum, so they are compared within float32's tolerance. Copies and pure sums (nearest
# neighbour and its gradient) are compared exactly.
INTERPOLATED = tolerance(np.float32)
# (align_corners, half_pixel_centers): every combination TensorFlow accepts.
FLAGS = [(False, False), (True, False), (False, True)]
# (image shape, size): upscaling, downscaling, mixed and odd ratios, 1 and 3 channels (TensorFlow
# has a separate 3-channel path), a 1-pixel dimension.
SHAPES = [
    ((2, 5, 7, 3), (9, 4)),
    ((1, 8, 6, 1), (3, 11)),
    ((3, 4, 4, 2), (4, 4)),   # same size
    ((1, 1, 5, 4), (3, 2)),
    ((2, 13, 3, 5), (5, 8)),
]


def image(shape, dtype, seed=0):
    """Random pixels: [-3, 3] for floating and signed types, [0, 250] for unsigned ones."""
    if np.issubdtype(np.dtype(dtype), np.unsignedinteger):
        return random_array(shape, dtype, seed=seed, low=0, high=250)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return random_array(shape, dtype, seed=seed, low=-100, high=100)
    return random_array(shape, dtype, seed=seed)


def resize(op, size, **attrs):
    return lambda x: op(images=x, size=size, **attrs)


def flags(align_corners, half_pixel_centers):
    return dict(align_corners=align_corners, half_pixel_centers=half_pixel_centers)


# --- forward ops: values ----------------------------------------------------------------------

FORWARD = {
    "bilinear": R.ResizeBilinear,
    "nearest": R.ResizeNearestNeighbor,
    "bicubic": R.ResizeBicubic,
}


@pytest.mark.parametrize("method", list(FORWARD))
@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_resize_matches_cpu_for_every_dtype_and_mode(method, align_corners, half_pixel_centers,
                                                     dtype):
    shape, size = SHAPES[0]
    x = image(shape, dtype, seed=3)
    assert_matches_cpu(resize(FORWARD[method], size, **flags(align_corners, half_pixel_centers)),
                       x, **(EXACT if method == "nearest" else INTERPOLATED))


@pytest.mark.parametrize("method", list(FORWARD))
@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("shape,size", SHAPES)
def test_resize_matches_cpu_for_every_shape(method, align_corners, half_pixel_centers, shape,
                                            size):
    x = image(shape, np.float32, seed=len(shape) + size[0])
    assert_matches_cpu(resize(FORWARD[method], size, **flags(align_corners, half_pixel_centers)),
                       x, **(EXACT if method == "nearest" else INTERPOLATED))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_resize_area_matches_cpu_for_every_dtype(align_corners, dtype):
    x = image((2, 9, 7, 3), dtype, seed=5)
    assert_matches_cpu(resize(R.ResizeArea, [4, 3], align_corners=align_corners), x,
                       **INTERPOLATED)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,size", SHAPES + [((1, 10, 10, 1), (3, 7)), ((1, 7, 3, 2), (20, 5))])
def test_resize_area_matches_cpu_for_every_shape(align_corners, shape, size):
    x = image(shape, np.float32, seed=size[1])
    assert_matches_cpu(resize(R.ResizeArea, size, align_corners=align_corners), x,
                       **INTERPOLATED)


def test_bilinear_resize_to_the_same_size_is_a_conversion_that_keeps_infinities():
    x = np.array([[1, np.inf], [-np.inf, 2]], np.float32).reshape(1, 2, 2, 1)
    y = assert_matches_cpu(resize(R.ResizeBilinear, [2, 2], half_pixel_centers=True), x, **EXACT)
    np.testing.assert_array_equal(y.numpy(), x)


def test_nearest_neighbor_rounding_rules_match_cpu_on_exact_halves():
    # 3 -> 6 and 6 -> 4 put source coordinates exactly on .5 boundaries in every mode.
    for shape, size in [((1, 3, 3, 1), (6, 6)), ((1, 6, 6, 1), (4, 4)), ((1, 5, 5, 1), (2, 9))]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for align_corners, half_pixel_centers in FLAGS:
            assert_matches_cpu(resize(R.ResizeNearestNeighbor, size,
                                      **flags(align_corners, half_pixel_centers)), x, **EXACT)


# --- ScaleAndTranslate ------------------------------------------------------------------------

KERNELS = ["lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle", "keyscubic",
           "mitchellcubic"]
# (image shape, size, scale, translation): down- and upsampling, translations that push samples
# outside the image, independent row and column scales.
SAMPLINGS = [
    ((2, 9, 8, 3), [4, 5], [0.45, 0.6], [0.0, 0.0]),
    ((1, 4, 6, 2), [9, 13], [2.25, 2.1], [-1.5, 0.75]),
    ((1, 7, 5, 1), [7, 5], [1.0, 1.0], [2.0, -3.0]),
]


def scale_and_translate(size, scale, translation, kernel_type, antialias):
    return lambda x: R.ScaleAndTranslate(
        images=x, size=size, scale=tf.constant(scale, tf.float32),
        translation=tf.constant(translation, tf.float32), kernel_type=kernel_type,
        antialias=antialias)


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("kernel_type", KERNELS)
@pytest.mark.parametrize("shape,size,scale,translation", SAMPLINGS)
def test_scale_and_translate_matches_cpu(antialias, kernel_type, shape, size, scale, translation):
    x = image(shape, np.float32, seed=size[0])
    assert_matches_cpu(scale_and_translate(size, scale, translation, kernel_type, antialias), x,
                       **INTERPOLATED)


@pytest.mark.parametrize("dtype", IMAGE_DTYPES)
def test_scale_and_translate_matches_cpu_for_every_dtype(dtype):
    x = image((1, 8, 7, 3), dtype, seed=1)
    assert_matches_cpu(scale_and_translate([5, 11], [0.6, 1.5], [0.25, -0.5], "lanczos3", True),
                       x, **INTERPOLATED)


def test_scale_and_translate_with_a_nan_translation_matches_cpu():
    x = image((1, 4, 4, 1), np.float32)
    y = assert_matches_cpu(
        scale_and_translate([3, 3], [0.75, 0.75], [float("nan"), 0.0], "triangle", True), x)
    assert np.isfinite(y.numpy()).all()


def test_scale_and_translate_kernel_type_is_case_insensitive():
    x = image((1, 6, 6, 1), np.float32)
    assert_matches_cpu(scale_and_translate([4, 4], [0.7, 0.7], [0.0, 0.0], "LanczoS5", True), x)


# --- gradients ----------------------------------------------------------------------------------

GRAD_SHAPES = [((2, 5, 7, 3), (9, 4)), ((1, 8, 6, 2), (3, 11)), ((1, 6, 1, 1), (13, 3))]


def assert_original_image_grad_matches_cpu(op, shape, size, dtype, seed, align_corners,
                                           half_pixel_centers):
    """`op` (ResizeBilinearGrad or ResizeBicubicGrad) of float32 upstream gradients of the
    resized `size` (drawn with `seed`) into an original image of `shape` and `dtype`, against the
    CPU."""
    grads = random_array((shape[0], *size, shape[3]), np.float32, seed=seed)
    original = np.zeros(shape, dtype)
    assert_matches_cpu(
        lambda g, o: op(grads=g, original_image=o, **flags(align_corners, half_pixel_centers)),
        grads, original, **tolerance(dtype))


@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape,size", GRAD_SHAPES)
def test_resize_bilinear_grad_matches_cpu(align_corners, half_pixel_centers, dtype, shape, size):
    assert_original_image_grad_matches_cpu(R.ResizeBilinearGrad, shape, size, dtype, 2,
                                           align_corners, half_pixel_centers)


@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape,size", GRAD_SHAPES)
def test_resize_nearest_neighbor_grad_matches_cpu(align_corners, half_pixel_centers, dtype,
                                                  shape, size):
    grads = random_array((shape[0], *size, shape[3]), dtype, seed=4)
    assert_matches_cpu(
        lambda g: R.ResizeNearestNeighborGrad(grads=g, size=shape[1:3],
                                              **flags(align_corners, half_pixel_centers)),
        grads, **EXACT)


@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,size", GRAD_SHAPES)
def test_resize_bicubic_grad_matches_cpu(align_corners, half_pixel_centers, dtype, shape, size):
    assert_original_image_grad_matches_cpu(R.ResizeBicubicGrad, shape, size, dtype, 6,
                                           align_corners, half_pixel_centers)


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("kernel_type", KERNELS)
@pytest.mark.parametrize("shape,size,scale,translation", SAMPLINGS)
def test_scale_and_translate_grad_matches_cpu(antialias, kernel_type, shape, size, scale,
                                              translation):
    grads = random_array((shape[0], *size, shape[3]), np.float32, seed=8)
    original = np.zeros(shape, np.float32)
    assert_matches_cpu(
        lambda g, o: R.ScaleAndTranslateGrad(
            grads=g, original_image=o, scale=tf.constant(scale, tf.float32),
            translation=tf.constant(translation, tf.float32), kernel_type=kernel_type,
            antialias=antialias),
        grads, original)


def test_nearest_neighbor_grad_with_both_flags_follows_the_cuda_kernel():
    # TensorFlow's CPU kernel rounds (i + 0.5) * scale here, its CUDA kernel floors it: the
    # virtual GPU behaves like the CUDA kernel.
    grads = random_array((1, 4, 4, 1), np.float32, seed=1)
    both = lambda g: R.ResizeNearestNeighborGrad(grads=g, size=[6, 6], align_corners=True,  # noqa
                                                 half_pixel_centers=True)
    actual = run_on("/GPU:0", both, grads)
    assert actual.device.endswith("GPU:0")
    scale = np.float32(5) / np.float32(3)  # align_corners: (6 - 1) / (4 - 1)
    source = [min(int(np.floor((np.float32(i) + np.float32(0.5)) * scale)), 5) for i in range(4)]
    expected = np.zeros((1, 6, 6, 1), np.float32)
    for y in range(4):
        for x in range(4):
            expected[0, source[y], source[x], 0] += grads[0, y, x, 0]
    np.testing.assert_array_equal(actual.numpy(), expected)
    # The CPU kernel's rounding sends some gradients elsewhere.
    assert not np.array_equal(run_on("/CPU:0", both, grads).numpy(), expected)


# (method, antialias, dtype): antialiased bilinear and bicubic, and the other kernels, go through
# ScaleAndTranslate, whose gradient TensorFlow has for float32 only.
TF_IMAGE_GRADIENTS = [
    (method, antialias, dtype)
    for method in ["bilinear", "nearest", "bicubic", "lanczos3", "mitchellcubic", "gaussian"]
    for antialias in [False, True]
    for dtype in [np.float32, np.float64]
    if dtype == np.float32 or (method in ("bilinear", "nearest", "bicubic") and not antialias)
    or method == "nearest"
]


@pytest.mark.parametrize("method,antialias,dtype", TF_IMAGE_GRADIENTS)
def test_tf_image_resize_gradient_matches_cpu(method, antialias, dtype):
    x = random_array((2, 7, 6, 3), dtype, seed=9)
    assert_gradients_match_cpu(
        lambda t: tf.image.resize(t, [11, 4], method=method, antialias=antialias), x,
        **tolerance(dtype))


@pytest.mark.parametrize("align_corners,half_pixel_centers", FLAGS)
@pytest.mark.parametrize("op", [R.ResizeBilinear, R.ResizeNearestNeighbor, R.ResizeBicubic])
def test_raw_resize_gradients_match_cpu(align_corners, half_pixel_centers, op):
    x = random_array((1, 5, 8, 2), np.float32, seed=10)
    assert_gradients_match_cpu(
        lambda t: op(images=t, size=[7, 3], **flags(align_corners, half_pixel_centers)), x)


def test_scale_and_translate_gradient_through_the_tape_matches_cpu():
    x = random_array((1, 6, 9, 2), np.float32, seed=11)
    assert_gradients_match_cpu(
        scale_and_translate([10, 4], [1.6, 0.45], [0.3, -0.2], "keyscubic", True), x)


# --- empty tensors ------------------------------------------------------------------------------

@pytest.mark.parametrize("op,attrs", [
    (R.ResizeBilinear, {}), (R.ResizeNearestNeighbor, {}), (R.ResizeBicubic, {}),
    (R.ResizeArea, {}),
])
def test_resize_of_an_empty_batch_launches_nothing(op, attrs):
    y = assert_matches_cpu(resize(op, [3, 5], **attrs), np.zeros((0, 4, 4, 2), np.float32),
                           expect_launch=False)
    assert y.shape == (0, 3, 5, 2)
    assert vgpu.stats()["launches"] == 0


def test_scale_and_translate_of_an_empty_batch_launches_nothing():
    y = assert_matches_cpu(scale_and_translate([3, 5], [0.5, 1.0], [0, 0], "box", True),
                           np.zeros((0, 4, 4, 2), np.float32), expect_launch=False)
    assert y.shape == (0, 3, 5, 2)
    assert vgpu.stats()["launches"] == 0


def test_gradients_of_empty_batches_and_channels_are_empty():
    empty_grads = np.zeros((0, 3, 3, 2), np.float32)
    no_channels = np.zeros((1, 3, 3, 0), np.float32)
    for grads in (empty_grads, no_channels):
        original = np.zeros((grads.shape[0], 5, 4, grads.shape[3]), np.float32)
        for op in (R.ResizeBilinearGrad, R.ResizeBicubicGrad):
            y = assert_matches_cpu(lambda g, o: op(grads=g, original_image=o), grads, original,
                                   expect_launch=False)
            assert y.shape == original.shape and vgpu.stats()["launches"] == 0
        y = assert_matches_cpu(lambda g: R.ResizeNearestNeighborGrad(grads=g, size=[5, 4]), grads,
                               expect_launch=False)
        assert y.shape == original.shape and vgpu.stats()["launches"] == 0


def test_gradients_from_an_empty_resized_image_are_zero():
    grads = np.zeros((2, 0, 3, 2), np.float32)
    y = assert_matches_cpu(lambda g: R.ResizeNearestNeighborGrad(grads=g, size=[4, 5]), grads)
    assert y.shape == (2, 4, 5, 2) and not y.numpy().any()
    y = assert_matches_cpu(
        lambda g, o: R.ScaleAndTranslateGrad(grads=g, original_image=o, scale=[0.5, 0.5],
                                             translation=[0.0, 0.0]),
        grads, np.ones((2, 4, 5, 2), np.float32))
    assert y.shape == (2, 4, 5, 2) and not y.numpy().any()


# --- errors -------------------------------------------------------------------------------------

def error_of(device, fn):
    """(error class, message without TensorFlow's node prefix and suffixes, message) of fn on
    `device`, or None when it succeeds. (TensorFlow runs an eager op whose host-memory inputs it
    must copy as a function, which adds the node's name after the message.)"""
    try:
        with tf.device(device):
            fn()
    except tf.errors.OpError as error:
        core = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", error.message)
        core = core.split(" [Op:")[0].split("\n\t [[")[0]
        return type(error), core.strip(), error.message
    return None


def ones(*shape, dtype=tf.float32):
    return tf.ones(shape, dtype)


BAD_INPUTS = {
    "both flags": lambda: R.ResizeBilinear(images=ones(1, 4, 4, 3), size=[2, 2],
                                           align_corners=True, half_pixel_centers=True),
    "rank 3 image": lambda: R.ResizeBicubic(images=ones(4, 4, 3), size=[2, 2]),
    "three sizes": lambda: R.ResizeNearestNeighbor(images=ones(1, 4, 4, 3), size=[2, 2, 2]),
    "2-D size": lambda: R.ResizeArea(images=ones(1, 4, 4, 3), size=[[2, 2]]),
    "zero size": lambda: R.ResizeBilinear(images=ones(1, 4, 4, 3), size=[0, 2]),
    "negative size": lambda: R.ResizeBicubic(images=ones(1, 4, 4, 3), size=[3, -1]),
    "no channels": lambda: R.ResizeArea(images=ones(1, 4, 4, 0), size=[2, 2]),
    "no rows": lambda: R.ResizeNearestNeighbor(images=ones(2, 0, 4, 1), size=[2, 2]),
    "nearest both flags": lambda: R.ResizeNearestNeighbor(
        images=ones(1, 4, 4, 1), size=[2, 2], align_corners=True, half_pixel_centers=True),
    "bicubic both flags": lambda: R.ResizeBicubic(
        images=ones(1, 4, 4, 1), size=[2, 2], align_corners=True, half_pixel_centers=True),
    "grad both flags": lambda: R.ResizeBilinearGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(1, 4, 4, 3), align_corners=True,
        half_pixel_centers=True),
    "grad rank 3": lambda: R.ResizeBicubicGrad(grads=ones(2, 2, 3),
                                               original_image=ones(1, 4, 4, 3)),
    "grad original rank 3": lambda: R.ResizeBilinearGrad(grads=ones(1, 2, 2, 3),
                                                         original_image=ones(4, 4, 3)),
    "grad empty resized": lambda: R.ResizeBilinearGrad(grads=ones(1, 0, 2, 3),
                                                       original_image=ones(1, 4, 4, 3)),
    "grad empty original": lambda: R.ResizeBicubicGrad(grads=ones(1, 2, 2, 3),
                                                       original_image=ones(1, 4, 0, 3)),
    "nearest grad rank 3": lambda: R.ResizeNearestNeighborGrad(grads=ones(2, 2, 3), size=[4, 4]),
    "nearest grad zero size": lambda: R.ResizeNearestNeighborGrad(grads=ones(1, 2, 2, 3),
                                                                  size=[0, 4]),
    "nearest grad three sizes": lambda: R.ResizeNearestNeighborGrad(grads=ones(1, 2, 2, 3),
                                                                    size=[4, 4, 4]),
    "unknown kernel": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2], scale=[0.5, 0.5], translation=[0.0, 0.0],
        kernel_type="cubic"),
    "zero scale": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2], scale=[0.0, 0.5], translation=[0.0, 0.0]),
    "nan scale": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2], scale=[0.5, float("nan")], translation=[0.0, 0.0]),
    "three scales": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2], scale=[0.5, 0.5, 0.5], translation=[0.0, 0.0]),
    "2-D translation": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2], scale=[0.5, 0.5], translation=[[0.0, 0.0]]),
    "translate zero size": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 0], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate three sizes": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 3), size=[2, 2, 1], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate no channels": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 4, 0), size=[2, 2], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate no columns": lambda: R.ScaleAndTranslate(
        images=ones(1, 4, 0, 2), size=[2, 2], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate rank 3": lambda: R.ScaleAndTranslate(
        images=ones(4, 4, 1), size=[2, 2], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate grad zero scale": lambda: R.ScaleAndTranslateGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(1, 4, 4, 3), scale=[0.5, -1.0],
        translation=[0.0, 0.0]),
    "translate grad rank 3": lambda: R.ScaleAndTranslateGrad(
        grads=ones(2, 2, 3), original_image=ones(1, 4, 4, 3), scale=[0.5, 0.5],
        translation=[0.0, 0.0]),
    "translate grad original rank 3": lambda: R.ScaleAndTranslateGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(4, 4, 3), scale=[0.5, 0.5],
        translation=[0.0, 0.0]),
    "translate grad three translations": lambda: R.ScaleAndTranslateGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(1, 4, 4, 3), scale=[0.5, 0.5],
        translation=[0.0, 0.0, 0.0]),
    "translate grad unknown kernel": lambda: R.ScaleAndTranslateGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(1, 4, 4, 3), scale=[0.5, 0.5],
        translation=[0.0, 0.0], kernel_type="Bicubic"),
    "bicubic grad both flags": lambda: R.ResizeBicubicGrad(
        grads=ones(1, 2, 2, 3), original_image=ones(1, 4, 4, 3), align_corners=True,
        half_pixel_centers=True),
    "nearest wider than 2^24": lambda: R.ResizeNearestNeighbor(
        images=ones(0, 1, 1 << 24, 1, dtype=tf.uint8), size=[1, 1]),
    # Empty batches with rows beyond int32: nothing is allocated, the size check still fails.
    "rows beyond int32": lambda: R.ResizeBilinear(images=ones(0, 1 << 31, 2, 1), size=[2, 2]),
    "grad rows beyond int32": lambda: R.ResizeBilinearGrad(
        grads=ones(0, 2, 2, 1), original_image=ones(0, 2, 1 << 31, 1)),
    "translate rows beyond int32": lambda: R.ScaleAndTranslate(
        images=ones(0, 1 << 31, 2, 1), size=[2, 2], scale=[0.5, 0.5], translation=[0.0, 0.0]),
    "translate grad rows beyond int32": lambda: R.ScaleAndTranslateGrad(
        grads=ones(0, 2, 2, 1), original_image=ones(0, 1 << 31, 2, 1), scale=[0.5, 0.5],
        translation=[0.0, 0.0]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_fail_like_tensorflow(case):
    expected = error_of("/CPU:0", BAD_INPUTS[case])
    actual = error_of("/GPU:0", BAD_INPUTS[case])
    assert expected is not None and actual is not None, (expected, actual)
    assert actual[0] is expected[0]
    assert actual[1] == expected[1]
    assert "GPU:0" in actual[2], f"the error did not come from the virtual GPU: {actual[2]}"


# --- tf.image and Keras paths -------------------------------------------------------------------

TF_IMAGE_METHODS = ["bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
                    "mitchellcubic"]


@pytest.mark.parametrize("method", TF_IMAGE_METHODS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_tf_image_resize_of_images_runs_on_the_device(method, dtype):
    x = image((2, 12, 10, 3), dtype, seed=12)
    fn = lambda t: tf.image.resize(t, [7, 15], method=method)  # noqa: E731
    assert_matches_cpu(fn, x, **INTERPOLATED)
    assert strictly_on_gpu(fn, x).device.endswith("GPU:0")


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "bicubic", "area", "lanczos3"])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_keras_resizing_layer_runs_on_the_device(interpolation, dtype):
    x = image((2, 9, 11, 3), np.dtype(dtype), seed=13)
    layer = keras.layers.Resizing(6, 14, interpolation=interpolation, dtype=dtype)
    assert_matches_cpu(layer, x, **INTERPOLATED)
    vgpu.reset_stats()
    assert strictly_on_gpu(layer, x).device.endswith("GPU:0")
    assert vgpu.stats()["launches"] >= 1


@pytest.mark.parametrize("interpolation", ["bilinear", "nearest", "bicubic", "lanczos5"])
def test_keras_up_sampling_layer_and_its_gradient_run_on_the_device(interpolation):
    x = random_array((2, 5, 4, 3), np.float32, seed=14)
    layer = keras.layers.UpSampling2D(size=(2, 3), interpolation=interpolation)
    assert_matches_cpu(layer, x, **INTERPOLATED)
    assert_gradients_match_cpu(layer, x)
    assert strictly_on_gpu(layer, x).device.endswith("GPU:0")


def test_resizes_inside_a_tf_function_with_computed_sizes_match_cpu():
    @tf.function(jit_compile=False)
    def resize_all(t):
        size = tf.shape(t)[1:3] * 2 - 1
        scale = tf.cast(size, tf.float32) / tf.cast(tf.shape(t)[1:3], tf.float32)
        return (tf.image.resize(t, size, method="bilinear"),
                R.ResizeNearestNeighbor(images=t, size=size, align_corners=True),
                R.ResizeBicubic(images=t, size=size),
                R.ResizeArea(images=t, size=size),
                R.ScaleAndTranslate(images=t, size=size, scale=scale, translation=[0.5, -0.5]))

    x = image((2, 6, 5, 3), np.uint8, seed=15)
    assert_matches_cpu(resize_all, x, **INTERPOLATED)
    strictly_on_gpu(resize_all, x)
