"""MatrixDiagPart, MatrixDiagPartV2 and MatrixDiagPartV3 (tf.linalg.diag_part) on the virtual GPU
against TensorFlow's CPU kernels: bit-exact in every registered dtype, one diagonal (one launch)
and bands of diagonals in the four alignments with padding values, square, wide, tall, batched
and empty matrices; TensorFlow's errors for bad k, padding and input; gradients through it; and Keras'
MeanIoU metric, which takes its confusion matrix's diagonal every step, with soft placement
off."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from ops.op_testing import (DATA_MOVEMENT_DTYPES, assert_moves_like_cpu, random_array,
                            strictly_on_gpu)

ALIGNMENTS = ["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"]


def diag_part(k, padding=0, align="RIGHT_LEFT"):
    return lambda t: tf.raw_ops.MatrixDiagPartV3(
        input=t, k=k, padding_value=np.array(padding).astype(t.dtype.as_numpy_dtype),
        align=align)


@pytest.mark.parametrize("dtype", DATA_MOVEMENT_DTYPES)
def test_one_diagonal_is_one_strided_slice_in_every_dtype(dtype):
    x = random_array((2, 3, 5, 4), dtype, seed=1)
    for k in (0, 2, -1, 3, -4):
        assert_moves_like_cpu(diag_part(k), x, launches=1)
    assert_moves_like_cpu(tf.linalg.diag_part, x, launches=1)
    assert_moves_like_cpu(lambda t: tf.raw_ops.MatrixDiagPart(input=t), x, launches=1)


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (7, 3), (1, 1), (2, 1, 6)])
@pytest.mark.parametrize("k", [0, 1, -1])
def test_one_diagonal_of_square_wide_and_tall_matrices(shape, k):
    x = random_array(shape, np.float32, seed=2)
    if -shape[-2] < k < shape[-1]:
        assert_moves_like_cpu(diag_part(k), x, launches=1)


@pytest.mark.parametrize("align", ALIGNMENTS)
@pytest.mark.parametrize("shape,band", [((4, 4), (-1, 2)), ((3, 6), (-2, 4)), ((6, 3), (-5, 0)),
                                        ((2, 5, 5), (1, 3)), ((2, 4, 7), (-3, -1))])
def test_a_band_of_diagonals_pads_as_aligned(align, shape, band):
    x = random_array(shape, np.float32, seed=3)
    assert_moves_like_cpu(diag_part(list(band), padding=9.5, align=align), x)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_, np.float16])
def test_a_band_in_other_dtypes_with_their_padding(dtype):
    x = random_array((2, 4, 5), dtype, seed=4)
    padding = 1 if dtype == np.bool_ else 7
    assert_moves_like_cpu(diag_part([-2, 1], padding=padding, align="LEFT_RIGHT"), x)


def test_matrix_diag_part_v2_packs_bands_left_left():
    x = random_array((3, 4, 6), np.float32, seed=5)
    v2 = lambda t: tf.raw_ops.MatrixDiagPartV2(input=t, k=[-1, 2],
                                               padding_value=tf.constant(-3.0))
    assert_moves_like_cpu(v2, x)


def test_a_band_inside_the_matrix_needs_no_pad():
    # Every diagonal of the band is as long as the longest: no padding, 2 launches each.
    x = random_array((5, 9), np.float32, seed=6)
    assert_moves_like_cpu(diag_part([1, 3]), x, launches=6)


@pytest.mark.parametrize("shape,k", [((0, 3, 4), 0), ((2, 0, 3), 0), ((2, 0, 3), [0, 1]),
                                     ((3, 4, 0), 0), ((0, 4, 4), [-1, 1])])
def test_empty_matrices_and_batches_give_empty_results(shape, k):
    x = np.zeros(shape, np.float32)
    assert_moves_like_cpu(diag_part(k), x, launches=0)


@pytest.mark.parametrize("k,padding,match", [
    ([[0, 1]], 0.0, "diag_index must be a scalar or vector, received shape: \\[1,2\\]"),
    (np.zeros([0], np.int32), 0.0, "Expected diag_index to have at least 1 element"),
    ([0, 1, 2], 0.0, "diag_index must have only one or two elements, received 3 elements"),
    (0, [1.0, 2.0], "Padding must be scalar"),
    (-3, 0.0, "lower_diag_index is out of bound: -3. It must be between -3 and 4"),
    (4, 0.0, "lower_diag_index is out of bound: 4. It must be between -3 and 4"),
    ([0, 4], 0.0, "upper_diag_index is out of bound: 4 It must be between -3 and 4"),
    ([1, 0], 0.0, "lower_diag_index must not be larger than upper_diag_index: 1 > 0"),
])
def test_bad_arguments_raise_tensorflows_errors(k, padding, match):
    x = tf.constant(random_array((2, 3, 4), np.float32, seed=7))
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            tf.raw_ops.MatrixDiagPartV3(input=x, k=tf.constant(k, tf.int32),
                                        padding_value=tf.constant(padding, tf.float32))


def test_a_vector_input_raises_tensorflows_error():
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError,
                                              match="input must be at least 2-dim, received "
                                                    "shape: \\[5\\]"):
            tf.linalg.diag_part(tf.constant(np.ones(5, np.float32)))


def test_gradients_flow_through_the_diagonal():
    # The gradient is TensorFlow's MatrixDiagV3, which runs on the CPU beside the device's
    # MatrixDiagPartV3: the values must be TensorFlow-CPU's.
    x = random_array((2, 4, 3), np.float64, seed=8)
    for k in (0, (-1, 1)):
        gradients = []
        for device in ("/CPU:0", "/GPU:0"):
            with tf.device(device):
                t = tf.constant(x)
                with tf.GradientTape() as tape:
                    tape.watch(t)
                    y = tf.linalg.diag_part(t, k=k) * tf.constant(3.0, tf.float64)
                gradients.append(tape.gradient(y, t).numpy())
        np.testing.assert_array_equal(gradients[1], gradients[0])


def test_keras_mean_iou_takes_its_diagonal_on_the_device():
    y_true = np.array([0, 1, 2, 2, 1, 0, 2, 1], np.int32)
    y_pred = np.array([0, 2, 2, 1, 1, 0, 2, 0], np.int32)
    expected = keras.metrics.MeanIoU(num_classes=3)
    expected.update_state(y_true, y_pred)

    def mean_iou(t, p):
        confusion = tf.math.confusion_matrix(t, p, num_classes=3, dtype=tf.float32)
        diagonal = tf.linalg.diag_part(confusion)
        union = tf.reduce_sum(confusion, 0) + tf.reduce_sum(confusion, 1) - diagonal
        return tf.reduce_mean(diagonal / union)

    diagonal_only = strictly_on_gpu(tf.linalg.diag_part,
                                    tf.constant(np.eye(3, dtype=np.float32) * 2))
    np.testing.assert_array_equal(diagonal_only.numpy(), [2, 2, 2])
    with tf.device("/GPU:0"):
        got = mean_iou(tf.constant(y_true), tf.constant(y_pred)).numpy()
    np.testing.assert_allclose(got, expected.result().numpy(), rtol=1e-6)
