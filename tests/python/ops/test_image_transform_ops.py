"""Geometric image ops on the virtual GPU against TensorFlow's CPU kernels:
ImageProjectiveTransformV2/V3 (every dtype, interpolation and fill mode, bit-exact, with the
Python gradient), CropAndResize with CropAndResizeGradImage/GradBoxes (both methods, every dtype,
boxes reaching outside the image, gradients through tf.image.crop_and_resize) and
NonMaxSuppressionV2/V3/V4 (indices and order exactly as the CPU, ties, NaN overlaps, padding);
empty shapes, and TensorFlow's error classes and messages for bad inputs."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array, run_on

EXACT = dict(rtol=0, atol=0)
BFLOAT16 = tf.bfloat16.as_numpy_dtype
PROJECTIVE_DTYPES = [np.uint8, np.int32, np.int64, np.float16, BFLOAT16, np.float32, np.float64]
CROP_DTYPES = [np.float16, np.float32, np.float64]
INTERPOLATIONS = ["NEAREST", "BILINEAR"]
FILL_MODES = ["REFLECT", "WRAP", "CONSTANT", "NEAREST"]


def image_of(shape, dtype, seed=0):
    """Test pixels: 0..200 for integer types, [-3, 3) otherwise."""
    if np.issubdtype(np.dtype(dtype), np.integer):
        return np.random.default_rng(seed).integers(0, 200, size=shape).astype(dtype)
    return random_array(shape, dtype, seed=seed)


def raises_like_cpu(error, match, fn, *args):
    """fn(*args) raises `error` matching `match` on the CPU and on the virtual GPU alike."""
    for device in ("/CPU:0", "/GPU:0"):
        with pytest.raises(error, match=match):
            run_on(device, fn, *args)


# --- ImageProjectiveTransformV2 / V3 --------------------------------------------------------

# One transform per image: rotation with zoom and shear, a translation far outside the image
# (every fill mode folds it several times), and a projective one whose projection k is exactly
# 0 at output x = 4 (TensorFlow returns the fill value there).
TRANSFORMS = np.array([
    [0.83, -0.41, 2.7, 0.45, 1.12, -1.9, 0.0, 0.0],
    [1.3, 0.2, -23.5, -0.1, 0.7, 17.25, 0.0, 0.0],
    [1.0, 0.0, 0.5, 0.0, 1.0, -0.5, -0.25, 0.0],
], np.float32)


def projective_v3(interpolation, fill_mode, fill_value, output_shape, transforms=TRANSFORMS):
    return lambda images: tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=tf.constant(transforms), output_shape=output_shape,
        fill_value=fill_value, interpolation=interpolation, fill_mode=fill_mode)


@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("dtype", PROJECTIVE_DTYPES)
def test_projective_transform_v3_matches_cpu_exactly(dtype, interpolation, fill_mode):
    images = image_of((3, 7, 9, 2), dtype, seed=1)
    assert_matches_cpu(projective_v3(interpolation, fill_mode, 5.5, [6, 11]), images, **EXACT)


@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_projective_transform_v2_with_one_transform_for_every_image_matches_cpu(interpolation,
                                                                                 fill_mode):
    images = image_of((2, 5, 6, 3), np.float32, seed=2)

    def transform(x):
        return tf.raw_ops.ImageProjectiveTransformV2(
            images=x, transforms=tf.constant(TRANSFORMS[:1] * np.float32([1, 1, 3, 1, 1, 3, 1, 1])),
            output_shape=[5, 6], interpolation=interpolation, fill_mode=fill_mode)

    assert_matches_cpu(transform, images, **EXACT)


def test_projective_transform_of_a_one_pixel_wide_and_of_an_empty_input_matches_cpu():
    # Extent 1 (REFLECT and WRAP map everything to 0) and extent 0 (everything is filled).
    for shape in [(3, 1, 4, 2), (3, 0, 4, 2)]:
        images = image_of(shape, np.float32, seed=3)
        for fill_mode in FILL_MODES:
            assert_matches_cpu(projective_v3("BILINEAR", fill_mode, -2.0, [3, 5]), images,
                               **EXACT)


def test_projective_transform_with_nothing_to_compute_launches_nothing():
    for shape in [(0, 4, 4, 3), (2, 4, 4, 0)]:
        out = assert_matches_cpu(projective_v3("NEAREST", "CONSTANT", 0.0, [3, 2],
                                               np.zeros((1, 8), np.float32)),
                                 np.zeros(shape, np.float32), expect_launch=False)
        assert out.shape == (shape[0], 3, 2, shape[3])


def test_projective_transform_of_integers_saturates_the_fill_value():
    # Converting an out-of-range float to an integer is undefined in TensorFlow's C++ (x86
    # wraps); the virtual GPU saturates, as a GPU converts, and NaN becomes 0.
    images = np.full((1, 2, 2, 1), 7, np.uint8)
    far_away = np.array([[1, 0, 100, 0, 1, 100, 0, 0]], np.float32)
    for fill, expected in [(-5.0, 0), (300.0, 255), (float("nan"), 0), (12.9, 12)]:
        out = run_on("/GPU:0", projective_v3("NEAREST", "CONSTANT", fill, [2, 2], far_away),
                     images)
        np.testing.assert_array_equal(out.numpy(), np.full((1, 2, 2, 1), expected, np.uint8))


@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_projective_transform_gradient_matches_cpu(dtype, interpolation, fill_mode):
    # TensorFlow's gradient transforms the upstream gradient by the inverse transform.
    images = image_of((3, 6, 7, 2), dtype, seed=4)
    invertible = TRANSFORMS.copy()
    invertible[2, 6] = 0.01
    assert_gradients_match_cpu(projective_v3(interpolation, fill_mode, 0.0, [6, 7], invertible),
                               images, **EXACT)


def test_keras_random_rotation_matches_cpu():
    import keras  # noqa: PLC0415

    images = image_of((2, 12, 10, 3), np.float32, seed=5)
    for device in ("/CPU:0", "/GPU:0"):
        layer = keras.layers.RandomRotation(0.3, fill_mode="reflect", seed=7)
        with tf.device(device):
            result = layer(tf.constant(images), training=True)
        if device == "/CPU:0":
            expected = result.numpy()
    assert result.device.endswith("GPU:0")
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(images=np.zeros((2, 3, 3), np.float32)), "Input images must have rank 4"),
    (dict(transforms=np.zeros((2, 8), np.float32)),
     "Input transform should be num_images x 8 or 1 x 8"),
    (dict(transforms=np.zeros((1, 6), np.float32)),
     "Input transform should be num_images x 8 or 1 x 8"),
    (dict(transforms=np.zeros((8,), np.float32)),
     "Input transform should be num_images x 8 or 1 x 8"),
    (dict(output_shape=np.array([[3, 3]], np.int32)),
     r"output shape must be 1-dimensional\[1,2\]"),
    (dict(output_shape=np.array([3, 3, 3], np.int32)),
     r"output shape must have two elements\[3\]"),
    (dict(output_shape=np.array([3, 0], np.int32)), "output dimensions must be positive"),
    (dict(fill_value=np.zeros((1,), np.float32)), r"fill_value must be a scalar\[1\]"),
])
def test_bad_projective_transform_inputs_are_invalid_argument(kwargs, match):
    args = dict(images=np.zeros((3, 4, 4, 1), np.float32),
                transforms=np.zeros((1, 8), np.float32),
                output_shape=np.array([3, 3], np.int32), fill_value=np.float32(0))
    args.update(kwargs)
    raises_like_cpu(tf.errors.InvalidArgumentError, match,
                    lambda: tf.raw_ops.ImageProjectiveTransformV3(interpolation="NEAREST",
                                                                  **args))


def test_unknown_interpolation_fails_the_node_on_the_virtual_gpu():
    # TensorFlow only logs it and computes with an uninitialised mode.
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="Invalid interpolation BICUBIC"):
        tf.raw_ops.ImageProjectiveTransformV3(
            images=tf.zeros([1, 2, 2, 1]), transforms=tf.zeros([1, 8]), output_shape=[2, 2],
            fill_value=0.0, interpolation="BICUBIC")


# --- CropAndResize and its gradients ---------------------------------------------------------

# Boxes inside, reaching outside (extrapolated points), flipped (y1 > y2), a point-sized box,
# and one spanning the whole image exactly.
BOXES = np.array([
    [0.1, 0.2, 0.8, 0.7],
    [-0.3, 0.5, 1.4, 1.2],
    [0.9, 0.8, 0.15, 0.05],
    [0.5, 0.5, 0.5, 0.5],
    [0.0, 0.0, 1.0, 1.0],
], np.float32)
BOX_INDEX = np.array([1, 0, 2, 1, 2], np.int32)
CROP_SIZES = [(4, 5), (1, 3), (3, 1), (1, 1)]


def crop_and_resize(method, crop_size, extrapolation_value=0.0, box_index=BOX_INDEX):
    return lambda image, boxes: tf.raw_ops.CropAndResize(
        image=image, boxes=boxes, box_ind=tf.constant(box_index), crop_size=list(crop_size),
        method=method, extrapolation_value=extrapolation_value)


@pytest.mark.parametrize("crop_size", CROP_SIZES)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("dtype", CROP_DTYPES)
def test_crop_and_resize_matches_cpu_exactly(dtype, method, crop_size):
    image = image_of((3, 6, 7, 2), dtype, seed=6)
    assert_matches_cpu(crop_and_resize(method, crop_size, extrapolation_value=-1.5), image, BOXES,
                       **EXACT)


def test_crop_and_resize_of_a_one_pixel_image_and_of_no_boxes_matches_cpu():
    assert_matches_cpu(crop_and_resize("bilinear", (3, 2)), image_of((3, 1, 1, 4), np.float32),
                       BOXES, **EXACT)
    empty = assert_matches_cpu(crop_and_resize("bilinear", (3, 2), box_index=np.zeros(0, np.int32)),
                               image_of((3, 4, 4, 2), np.float32), np.zeros((0, 4), np.float32),
                               expect_launch=False)
    assert empty.shape == (0, 3, 2, 2)
    no_depth = assert_matches_cpu(crop_and_resize("nearest", (2, 2)),
                                  np.zeros((3, 4, 4, 0), np.float32), BOXES, expect_launch=False)
    assert no_depth.shape == (5, 2, 2, 0)


def test_crop_and_resize_of_non_finite_boxes_extrapolates_like_tensorflows_gpu():
    # TensorFlow's CPU kernel refuses non-finite boxes; its GPU kernel (and this one) treats a
    # coordinate that is not a number, or infinite, as outside the image.
    boxes = np.array([[np.nan, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, np.inf], [0.0, 0.2, 1.0, 0.9]],
                     np.float32)
    fn = crop_and_resize("bilinear", (2, 3), extrapolation_value=7.0,
                         box_index=np.zeros(3, np.int32))
    image = image_of((1, 4, 4, 1), np.float32)
    with tf.device("/CPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match="not finite"):
        fn(tf.constant(image), tf.constant(boxes))
    crops = run_on("/GPU:0", fn, image, boxes).numpy()
    np.testing.assert_array_equal(crops[:2], np.full((2, 2, 3, 1), 7.0, np.float32))
    finite = run_on("/CPU:0", crop_and_resize("bilinear", (2, 3), extrapolation_value=7.0,
                                              box_index=np.zeros(1, np.int32)), image, boxes[2:])
    np.testing.assert_array_equal(crops[2:], finite.numpy())


def gradients_through_crop_and_resize(method, crop_size):
    return lambda image, boxes: tf.image.crop_and_resize(image, boxes, BOX_INDEX, crop_size,
                                                         method=method)


@pytest.mark.parametrize("crop_size", CROP_SIZES)
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("dtype", CROP_DTYPES)
def test_crop_and_resize_gradients_match_cpu(dtype, method, crop_size):
    # Image gradient (CropAndResizeGradImage) and box gradient (CropAndResizeGradBoxes).
    image = image_of((3, 6, 7, 2), dtype, seed=7)
    tolerance = dict(rtol=1e-2, atol=1e-2) if dtype == np.float16 else EXACT
    grads = assert_gradients_match_cpu(gradients_through_crop_and_resize(method, crop_size),
                                       image, BOXES, **tolerance)
    assert grads[0].dtype == dtype and grads[1].dtype == np.float32


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_crop_and_resize_grad_image_accumulates_overlapping_boxes_like_cpu(method):
    # Eight boxes on one image, all overlapping: the sums run in box order, as the CPU's.
    rng = np.random.default_rng(8)
    boxes = np.sort(rng.uniform(-0.2, 1.2, (8, 2, 2)), axis=1).reshape(8, 4).astype(np.float32)
    boxes = boxes[:, [0, 2, 1, 3]]
    grads = random_array((8, 5, 4, 3), np.float32, seed=9)

    def grad_image(g, b):
        return tf.raw_ops.CropAndResizeGradImage(grads=g, boxes=b, box_ind=tf.zeros([8], tf.int32),
                                                 image_size=[2, 9, 8, 3], T=tf.float32,
                                                 method=method)

    out = assert_matches_cpu(grad_image, grads, boxes, **EXACT)
    assert not np.any(out.numpy()[1])  # the image no box samples gets no gradient


@pytest.mark.parametrize("crop_size", CROP_SIZES)
@pytest.mark.parametrize("dtype", CROP_DTYPES)
def test_crop_and_resize_grad_boxes_matches_cpu(dtype, crop_size):
    image = image_of((3, 6, 7, 2), dtype, seed=10)
    grads = random_array((5, *crop_size, 2), np.float32, seed=11)
    assert_matches_cpu(
        lambda g, i, b: tf.raw_ops.CropAndResizeGradBoxes(grads=g, image=i, boxes=b,
                                                          box_ind=tf.constant(BOX_INDEX)),
        grads, image, BOXES, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bad_index", [3, -1])
def test_box_index_outside_the_batch_is_out_of_range_for_every_crop_op(bad_index):
    box_index = BOX_INDEX.copy()
    box_index[3] = bad_index
    image = image_of((3, 4, 4, 2), np.float32)
    grads = random_array((5, 2, 2, 2), np.float32)
    match = r"box_index has values outside \[0, batch_size\)"
    ops = [
        lambda: tf.raw_ops.CropAndResize(image=image, boxes=BOXES, box_ind=box_index,
                                         crop_size=[2, 2]),
        lambda: tf.raw_ops.CropAndResizeGradImage(grads=grads, boxes=BOXES, box_ind=box_index,
                                                  image_size=[3, 4, 4, 2], T=tf.float32),
        lambda: tf.raw_ops.CropAndResizeGradBoxes(grads=grads, image=image, boxes=BOXES,
                                                  box_ind=box_index),
    ]
    for op in ops:
        raises_like_cpu(tf.errors.OutOfRangeError, match, op)


IMAGE = np.zeros((2, 4, 4, 1), np.float32)
ONE_BOX = np.array([[0, 0, 1, 1]], np.float32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(image=np.zeros((4, 4, 1), np.float32)), r"input image must be 4-D\[4,4,1\]"),
    (dict(image=np.zeros((2, 0, 4, 1), np.float32)), "image dimensions must be positive"),
    (dict(boxes=np.zeros((4,), np.float32)), r"boxes must be 2-D, got: \[4\]"),
    (dict(box_ind=np.zeros((1, 1), np.int32)), r"box_indices must be rank 1 but is shape \[1,1\]"),
    (dict(boxes=np.zeros((1, 3), np.float32)), "boxes must have 4 columns"),
    (dict(box_ind=np.zeros((2,), np.int32)), "box_index has incompatible shape"),
    (dict(crop_size=np.array([[2, 2]], np.int32)), r"crop_size must be 1-D\[1,2\]"),
    (dict(crop_size=np.array([2, 2, 2], np.int32)), r"crop_size must have two elements\[3\]"),
    (dict(crop_size=np.array([2, 0], np.int32)), "crop dimensions must be positive"),
])
def test_bad_crop_and_resize_inputs_are_invalid_argument(kwargs, match):
    args = dict(image=IMAGE, boxes=ONE_BOX, box_ind=np.zeros((1,), np.int32),
                crop_size=np.array([2, 2], np.int32))
    args.update(kwargs)
    raises_like_cpu(tf.errors.InvalidArgumentError, match,
                    lambda: tf.raw_ops.CropAndResize(**args))


@pytest.mark.parametrize("kwargs,match", [
    (dict(grads=np.zeros((1, 2, 2), np.float32)), r"grads image must be 4-D\[1,2,2\]"),
    (dict(grads=np.zeros((1, 0, 2, 1), np.float32)), "grads dimensions must be positive"),
    (dict(grads=np.zeros((2, 2, 2, 1), np.float32)), "boxes and grads have incompatible shape"),
    (dict(image_size=np.array([[2, 4, 4, 1]], np.int32)), r"image_size must be 1-D\[1,4\]"),
    (dict(image_size=np.array([2, 4, 4], np.int32)), r"image_size must have 4 elements\[3\]"),
    (dict(image_size=np.array([2, 4, 0, 1], np.int32)), "image dimensions must be positive"),
    (dict(image_size=np.array([2, 4, 4, 3], np.int32)), "image_size and grads are incompatible"),
    (dict(image_size=np.array([-1, 4, 4, 1], np.int32)), "Expected a non-negative size, got -1"),
])
def test_bad_crop_and_resize_grad_image_inputs_are_invalid_argument(kwargs, match):
    args = dict(grads=np.zeros((1, 2, 2, 1), np.float32), boxes=ONE_BOX,
                box_ind=np.zeros((1,), np.int32), image_size=np.array([2, 4, 4, 1], np.int32))
    args.update(kwargs)
    raises_like_cpu(tf.errors.InvalidArgumentError, match,
                    lambda: tf.raw_ops.CropAndResizeGradImage(T=tf.float32, **args))


@pytest.mark.parametrize("kwargs,match", [
    (dict(grads=np.zeros((1, 2, 2), np.float32)), r"grads image must be 4-D\[1,2,2\]"),
    (dict(image=np.zeros((2, 4, 4), np.float32)), r"input image must be 4-D\[2,4,4\]"),
    (dict(image=np.zeros((2, 4, 4, 3), np.float32)), "image, grads depth differ"),
    (dict(grads=np.zeros((3, 2, 2, 1), np.float32)), "boxes and grads have incompatible shape"),
])
def test_bad_crop_and_resize_grad_boxes_inputs_are_invalid_argument(kwargs, match):
    args = dict(grads=np.zeros((1, 2, 2, 1), np.float32), image=IMAGE, boxes=ONE_BOX,
                box_ind=np.zeros((1,), np.int32))
    args.update(kwargs)
    raises_like_cpu(tf.errors.InvalidArgumentError, match,
                    lambda: tf.raw_ops.CropAndResizeGradBoxes(**args))


# --- NonMaxSuppressionV2 / V3 / V4 -----------------------------------------------------------

def nms_boxes(count=60, seed=12):
    """Clustered boxes with corners in either order, quantised scores (many ties), a zero-area
    box and one with a NaN corner (its overlaps are NaN: TensorFlow re-queues it at score 0)."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, (6, 2))[rng.integers(0, 6, count)]
    sizes = rng.uniform(0.5, 3, (count, 2))
    corners = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=1)
    flip = rng.random(count) < 0.3
    corners[flip] = corners[flip][:, [2, 3, 0, 1]]
    corners[5] = [4, 4, 4, 6]
    corners[9] = [np.nan, 1, 2, 3]
    scores = np.round(rng.uniform(0, 1, count), 1)
    return corners.astype(np.float32), scores.astype(np.float32)


@pytest.mark.parametrize("max_output_size", [0, 1, 7, 100])
@pytest.mark.parametrize("iou_threshold", [0.0, 0.3, 0.6, 1.0])
def test_non_max_suppression_v2_v3_select_the_cpus_indices(iou_threshold, max_output_size):
    boxes, scores = nms_boxes()
    assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV2(
        boxes=b, scores=s, max_output_size=max_output_size, iou_threshold=iou_threshold),
        boxes, scores)
    for score_threshold in [float("-inf"), 0.0, 0.35]:
        assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV3(
            boxes=b, scores=s, max_output_size=max_output_size, iou_threshold=iou_threshold,
            score_threshold=score_threshold), boxes, scores)


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("max_output_size", [0, 5, 100])
def test_non_max_suppression_v4_matches_cpu_with_and_without_padding(pad, max_output_size):
    boxes, scores = nms_boxes(seed=13)
    out = assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV4(
        boxes=b, scores=s, max_output_size=max_output_size, iou_threshold=0.4,
        score_threshold=0.15, pad_to_max_output_size=pad), boxes, scores)
    assert out.valid_outputs.device.endswith("GPU:0")


def test_non_max_suppression_with_float16_thresholds_and_the_public_api_matches_cpu():
    boxes, scores = nms_boxes(seed=14)
    assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV3(
        boxes=b, scores=s, max_output_size=20, iou_threshold=tf.constant(0.5, tf.float16),
        score_threshold=tf.constant(0.2, tf.float16)), boxes, scores)
    assert_matches_cpu(lambda b, s: tf.image.non_max_suppression(b, s, 15, 0.45), boxes, scores)


def test_non_max_suppression_of_no_boxes_matches_cpu():
    boxes, scores = np.zeros((0, 4), np.float32), np.zeros((0,), np.float32)
    empty = assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV3(
        boxes=b, scores=s, max_output_size=4, iou_threshold=0.5, score_threshold=0.0),
        boxes, scores, expect_launch=False)
    assert empty.shape == (0,)
    padded = assert_matches_cpu(lambda b, s: tf.raw_ops.NonMaxSuppressionV4(
        boxes=b, scores=s, max_output_size=4, iou_threshold=0.5, score_threshold=0.0,
        pad_to_max_output_size=True), boxes, scores, expect_launch=False)
    assert padded.selected_indices.shape == (4,) and int(padded.valid_outputs) == 0


NMS_BOXES = np.zeros((3, 4), np.float32)
NMS_SCORES = np.zeros((3,), np.float32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(max_output_size=np.array([2], np.int32)),
     r"max_output_size must be 0-D, got shape \[1\] \(Shape must be rank 0 but is rank 1\)"),
    (dict(iou_threshold=np.array([0.5], np.float32)),
     r"iou_threshold must be 0-D, got shape \[1\] \(Shape must be rank 0 but is rank 1\)"),
    (dict(iou_threshold=np.float32(1.5)), r"iou_threshold must be in \[0, 1\]"),
    (dict(iou_threshold=np.float32(np.nan)), r"iou_threshold must be in \[0, 1\]"),
    (dict(score_threshold=np.zeros((2,), np.float32)),
     r"score_threshold must be 0-D, got shape \[2\]"),
    (dict(boxes=np.zeros((3,), np.float32)),
     r"boxes must be 2-D\[3\] \(Shape must be rank 2 but is rank 1\)"),
    (dict(boxes=np.zeros((3, 5), np.float32)),
     r"boxes must have 4 columns \(Dimension must be 4 but is 5\)"),
    (dict(scores=np.zeros((3, 1), np.float32)),
     r"scores must be 1-D\[3,1\] \(Shape must be rank 1 but is rank 2\)"),
    (dict(scores=np.zeros((2,), np.float32)),
     r"scores has incompatible shape \(Dimensions must be equal, but are 3 and 2\)"),
    (dict(max_output_size=np.int32(-1)), "output size must be non-negative"),
])
def test_bad_non_max_suppression_inputs_are_invalid_argument(kwargs, match):
    args = dict(boxes=NMS_BOXES, scores=NMS_SCORES, max_output_size=np.int32(2),
                iou_threshold=np.float32(0.5), score_threshold=np.float32(0))
    args.update(kwargs)
    raises_like_cpu(tf.errors.InvalidArgumentError, match,
                    lambda: tf.raw_ops.NonMaxSuppressionV3(**args))


def test_non_max_suppression_v2_and_v4_scalar_messages_have_no_rank_note():
    for op in (tf.raw_ops.NonMaxSuppressionV2, tf.raw_ops.NonMaxSuppressionV4):
        extra = {} if op is tf.raw_ops.NonMaxSuppressionV2 else dict(score_threshold=0.0)
        raises_like_cpu(tf.errors.InvalidArgumentError, r"got shape \[1\](?! \(Shape)",
                        lambda: op(boxes=NMS_BOXES, scores=NMS_SCORES, max_output_size=[2],
                                   iou_threshold=0.5, **extra))


def test_image_ops_are_registered_for_tensorflows_gpu_dtypes():
    catalog = {entry["op"]: set(entry["dtypes"]) for entry in vgpu.ops()}
    assert {"uint8", "int32", "int64", "float16", "float32", "float64", "bfloat16"} <= \
        catalog["ImageProjectiveTransformV3"]
    for op in ("CropAndResize", "CropAndResizeGradImage", "CropAndResizeGradBoxes"):
        assert {"float16", "float32", "float64"} <= catalog[op]
    for op in ("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4"):
        assert "float32" in catalog[op]
