"""ReverseV2 and ReverseSequence on the virtual GPU against TensorFlow's CPU kernels: every
registered dtype, each and several axes (negative ones too), batch/sequence dimensions in either
order and ranks 2 to 5, int32 and int64 lengths, gradients, empty and scalar tensors, invalid
lengths (clamped, never a crash) and bad arguments raising TensorFlow's error class."""
import numpy as np
import pytest
import tensorflow as tf

from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array

REVERSE_TYPES = [np.float32, np.float16, tf.bfloat16.as_numpy_dtype, np.float64, np.uint8,
                 np.bool_]
SEQUENCE_TYPES = [np.float32, np.float16, tf.bfloat16.as_numpy_dtype, np.float64, np.bool_]


@pytest.mark.parametrize("dtype", REVERSE_TYPES)
@pytest.mark.parametrize("axes", [[0], [1], [-1], [0, 2], [2, 0, 1], []])
def test_reverse_v2_matches_cpu(dtype, axes):
    x = random_array((4, 5, 3), dtype, seed=len(axes))
    assert_matches_cpu(lambda t: tf.reverse(t, axes), x, expect_launch=True)


@pytest.mark.parametrize("shape", [(7,), (2, 3, 1, 4, 2), (1, 2, 1, 2, 1, 2, 1, 3)])
def test_reverse_v2_any_rank_and_int64_axis(shape):
    x = random_array(shape, np.float32, seed=1)
    axis = tf.constant(list(range(0, len(shape), 2)), tf.int64)
    assert_matches_cpu(lambda t: tf.reverse(t, axis), x)


def test_reverse_v2_gradient_matches_cpu():
    x = random_array((3, 6, 2), np.float32, seed=2)
    assert_gradients_match_cpu(lambda t: tf.reverse(t, [1]), x)


def test_reverse_v2_passes_scalars_and_empty_tensors_through():
    for x in (np.float32(3.0), np.zeros((0, 4), np.float32)):
        assert_matches_cpu(lambda t: tf.reverse(t, [0] if np.ndim(x) else []), x,
                           expect_launch=False)


def test_reverse_v2_rejects_bad_axes():
    x = np.zeros((2, 3), np.float32)
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of valid range"):
            tf.reverse(x, [2])
        with pytest.raises(tf.errors.InvalidArgumentError, match="specified more than once"):
            tf.reverse(x, [1, -1])
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be 1-dimension"):
            tf.raw_ops.ReverseV2(tensor=x, axis=[[0]])


def reverse_sequence(lengths, seq_axis, batch_axis):
    return lambda t: tf.reverse_sequence(t, lengths, seq_axis=seq_axis, batch_axis=batch_axis)


@pytest.mark.parametrize("dtype", SEQUENCE_TYPES)
@pytest.mark.parametrize("length_type", [np.int32, np.int64])
def test_reverse_sequence_matches_cpu(dtype, length_type):
    x = random_array((4, 6, 3), dtype, seed=3)
    lengths = np.array([6, 0, 3, 1], length_type)
    assert_matches_cpu(reverse_sequence(lengths, 1, 0), x)


@pytest.mark.parametrize("shape,seq_axis,batch_axis", [
    ((5, 4), 0, 1), ((4, 5), 1, 0), ((5, 3, 4), 0, 2), ((2, 4, 3, 5), 3, 1),
    ((3, 2, 4, 2, 5), 2, 4), ((6, 3, 2), 0, 1),
])
def test_reverse_sequence_dimension_orders_match_cpu(shape, seq_axis, batch_axis):
    x = random_array(shape, np.float32, seed=4)
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, shape[seq_axis] + 1, shape[batch_axis]).astype(np.int64)
    assert_matches_cpu(reverse_sequence(lengths, seq_axis, batch_axis), x)


def test_reverse_sequence_gradient_matches_cpu():
    x = random_array((3, 5, 2), np.float32, seed=6)
    assert_gradients_match_cpu(reverse_sequence(np.array([5, 2, 3]), 1, 0), x)


def test_reverse_sequence_clamps_invalid_lengths_without_crashing():
    x = random_array((3, 4, 2), np.float32, seed=7)
    with tf.device("/GPU:0"):
        y = tf.reverse_sequence(x, np.array([-2, 9, 2], np.int32), seq_axis=1, batch_axis=0)
    expected = x.copy()
    expected[1] = x[1, ::-1]          # longer than the sequence: the whole of it
    expected[2, :2] = x[2, 1::-1]     # a valid length; the negative one reverses nothing
    np.testing.assert_array_equal(y.numpy(), expected)


def test_reverse_sequence_rejects_bad_arguments():
    x = np.zeros((2, 3, 4), np.float32)
    err = tf.errors.InvalidArgumentError
    with tf.device("/GPU:0"):
        with pytest.raises(err, match="batch_dim == seq_dim == 1"):
            tf.raw_ops.ReverseSequence(input=x, seq_lengths=[1, 1, 1], seq_dim=1, batch_dim=1)
        with pytest.raises(err, match="seq_dim must be < input rank"):
            tf.raw_ops.ReverseSequence(input=x, seq_lengths=[1, 1], seq_dim=3, batch_dim=0)
        with pytest.raises(err, match=r"Length of seq_lengths != input.dims\(0\), \(3 vs. 2\)"):
            tf.raw_ops.ReverseSequence(input=x, seq_lengths=[1, 1, 1], seq_dim=1, batch_dim=0)
        with pytest.raises(err, match="seq_lengths must be 1-dim"):
            tf.raw_ops.ReverseSequence(input=x, seq_lengths=[[1, 1]], seq_dim=1, batch_dim=0)
        with pytest.raises(err, match="Unhandled input dimensions: 6"):
            tf.raw_ops.ReverseSequence(input=np.zeros((2, 1, 1, 1, 1, 1), np.float32),
                                       seq_lengths=[1, 1], seq_dim=1, batch_dim=0)
        with pytest.raises(err, match="Invalid seq_dim"):
            tf.raw_ops.ReverseSequence(input=x, seq_lengths=[1, 1], seq_dim=-1, batch_dim=0)
