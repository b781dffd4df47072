"""SpaceToBatchND, BatchToSpaceND, SpaceToBatch and BatchToSpace on the virtual GPU against
TensorFlow's CPU kernels: bit-exact in every registered dtype, over block shapes of one to three
dimensions, paddings and crops, folded dimensions, empty tensors; gradients; TensorFlow's errors
for bad input; and a dilated Conv1D model (TensorFlow rewrites its convolution into these ops)
training on the device with soft placement off."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (DATA_MOVEMENT_DTYPES, EXACT, assert_gradients_match_cpu,
                             assert_moves_like_cpu, assert_raises_like_cpu, random_array, run_on,
                             strictly_on_gpu)


def matches_cpu_launching_unless_empty(fn, x):
    """fn(x) on GPU:0 equals the CPU's; a launch runs unless the result is empty."""
    empty = run_on("/CPU:0", fn, x).shape.num_elements() == 0
    assert_moves_like_cpu(fn, x, launches=0 if empty else None)


def space_to_batch(block, paddings):
    return lambda t: tf.space_to_batch_nd(t, block, paddings)


def batch_to_space(block, crops):
    return lambda t: tf.batch_to_space(t, block, crops)


@pytest.mark.parametrize("dtype", DATA_MOVEMENT_DTYPES)
def test_space_to_batch_and_back_match_cpu_in_every_dtype(dtype):
    x = random_array((2, 5, 7, 3), dtype, seed=1)
    # A padding: a pad into scratch memory, then the transpose.
    assert_moves_like_cpu(space_to_batch([2, 3], [[1, 0], [0, 2]]), x, launches=2)
    # No padding: the transpose alone, in both directions.
    assert_moves_like_cpu(space_to_batch([5, 7], [[0, 0], [0, 0]]), x, launches=1)
    y = random_array((12, 3, 4, 3), dtype, seed=2)
    assert_moves_like_cpu(batch_to_space([2, 3], [[0, 0], [0, 0]]), y, launches=1)
    # A crop: the transpose into scratch memory, then a slice.
    assert_moves_like_cpu(batch_to_space([2, 3], [[1, 2], [0, 1]]), y, launches=2)


@pytest.mark.parametrize("shape,block,paddings", [
    ((3, 30, 4), [2], [[4, 0]]),                       # a causal dilated Conv1D
    ((3, 31, 4), [4], [[3, 2]]),
    ((1, 8), [8], [[0, 0]]),                           # no depth
    ((2, 6, 4, 5), [1, 2], [[1, 1], [0, 0]]),          # a block of 1 with padding stays blocked
    ((2, 3, 6, 4, 5), [1, 3, 2], [[0, 0], [1, 2], [0, 0]]),  # a leading 1 folds into the batch
    ((2, 6, 4, 3, 5), [3, 2, 1], [[0, 0], [1, 1], [0, 0]]),  # a trailing 1 folds into the depth
    ((2, 4, 6, 2, 3), [2, 3, 2], [[0, 2], [1, 2], [1, 1]]),  # three blocked dimensions
    ((2, 0, 3, 2), [2, 3], [[2, 0], [1, 2]]),          # an empty input padded to a zero output
    ((0, 4, 3, 2), [2, 3], [[0, 0], [0, 0]]),          # an empty batch
])
def test_space_to_batch_matches_cpu_for_blocks_and_paddings(shape, block, paddings):
    x = random_array(shape, np.float32, seed=len(shape) + sum(block))
    matches_cpu_launching_unless_empty(space_to_batch(block, paddings), x)


@pytest.mark.parametrize("shape,block,crops", [
    ((6, 15, 4), [2], [[4, 0]]),
    ((8, 8, 4), [4], [[3, 2]]),
    ((8, 1), [8], [[0, 0]]),
    ((4, 6, 4, 5), [1, 2], [[1, 1], [0, 0]]),
    ((12, 3, 2, 4, 5), [1, 3, 2], [[0, 0], [1, 2], [0, 0]]),
    ((12, 2, 2, 3, 5), [3, 2, 1], [[0, 0], [1, 1], [0, 0]]),
    ((24, 2, 2, 2, 3), [2, 3, 2], [[0, 2], [1, 2], [1, 1]]),
    ((6, 1, 1, 2), [2, 3], [[1, 1], [1, 2]]),          # cropped down to nothing
    ((0, 4, 3, 2), [2, 3], [[0, 0], [0, 0]]),
])
def test_batch_to_space_matches_cpu_for_blocks_and_crops(shape, block, crops):
    x = random_array(shape, np.float32, seed=len(shape) + sum(block) + 1)
    matches_cpu_launching_unless_empty(batch_to_space(block, crops), x)


def test_blocks_of_one_without_padding_forward_the_input_without_a_launch():
    x = random_array((2, 3, 4, 5), np.float32, seed=3)
    assert_moves_like_cpu(space_to_batch([1, 1], [[0, 0], [0, 0]]), x, launches=0)
    assert_moves_like_cpu(batch_to_space([1, 1, 1], [[0, 0], [0, 0], [0, 0]]), x, launches=0)


@pytest.mark.parametrize("block_type,pads_type", [(tf.int32, tf.int64), (tf.int64, tf.int32),
                                                  (tf.int64, tf.int64)])
def test_block_shape_and_paddings_may_be_int32_or_int64(block_type, pads_type):
    x = random_array((2, 6, 4, 3), np.float32, seed=4)
    block = tf.constant([2, 2], block_type)
    assert_moves_like_cpu(lambda t: tf.raw_ops.SpaceToBatchND(
        input=t, block_shape=block, paddings=tf.constant([[0, 0], [1, 1]], pads_type)),
        x, launches=2)
    y = random_array((8, 3, 2, 3), np.float32, seed=5)
    assert_moves_like_cpu(lambda t: tf.raw_ops.BatchToSpaceND(
        input=t, block_shape=block, crops=tf.constant([[1, 0], [0, 1]], pads_type)),
        y, launches=2)


@pytest.mark.parametrize("index_type", [tf.int32, tf.int64])
def test_space_to_batch_and_batch_to_space_with_a_block_size_match_cpu(index_type):
    x = random_array((2, 5, 6, 3), np.float32, seed=6)
    assert_moves_like_cpu(lambda t: tf.raw_ops.SpaceToBatch(
        input=t, paddings=tf.constant([[1, 0], [1, 2]], index_type), block_size=3), x,
        launches=2)
    y = random_array((8, 3, 2, 3), np.float32, seed=7)
    assert_moves_like_cpu(lambda t: tf.raw_ops.BatchToSpace(
        input=t, crops=tf.constant([[1, 0], [0, 2]], index_type), block_size=2), y,
        launches=2)


def test_gradients_match_cpu():
    assert_gradients_match_cpu(space_to_batch([2, 3], [[1, 0], [0, 2]]),
                               random_array((2, 5, 7, 3), np.float32, seed=8), **EXACT)
    assert_gradients_match_cpu(batch_to_space([2, 2], [[1, 0], [0, 1]]),
                               random_array((8, 3, 4, 2), np.float32, seed=9), **EXACT)


def test_four_blocked_dimensions_above_one_are_unimplemented_with_a_clear_error():
    # TensorFlow allows 4 blocked dimensions; all four above 1 need a transpose of rank 10.
    x = random_array((1, 2, 2, 2, 2, 1), np.float32, seed=10)
    fn = space_to_batch([2, 2, 2, 2], [[0, 0]] * 4)
    expected = run_on("/CPU:0", fn, x)
    assert expected.shape == (16, 1, 1, 1, 1, 1)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.UnimplementedError,
                                            match="transpose of rank 10"):
        fn(tf.constant(x))


def raw_space_to_batch(block, paddings):
    return lambda t: tf.raw_ops.SpaceToBatchND(input=t, block_shape=block, paddings=paddings)


def raw_batch_to_space(block, crops):
    return lambda t: tf.raw_ops.BatchToSpaceND(input=t, block_shape=block, crops=crops)


@pytest.mark.parametrize("fn,match", [
    (raw_space_to_batch([[2]], [[0, 0]]), "block_shape rank should be 1 instead of 2"),
    (raw_space_to_batch([2, 2, 2, 2], [[0, 0]] * 4), "input rank should be >= 5 instead of 4"),
    (raw_space_to_batch([2, 2], [[0, 0]]), r"paddings should have shape \[2, 2\] instead of "
                                           r"\[1,2\]"),
    (raw_space_to_batch([2, 0], [[0, 0], [0, 0]]),
     "All values in block_shape must be positive, got value, 0 at index 1."),
    (raw_space_to_batch([2, 2], [[0, -1], [0, 0]]), "Paddings must be non-negative"),
    (raw_space_to_batch([2, 2], [[0, 1], [0, 0]]),
     r"padded_shape\[0\]=5 is not divisible by block_shape\[0\]=2"),
    (raw_batch_to_space([2, 2], [[0, 0]]), r"crops should have shape \[2, 2\] instead of \[1,2\]"),
    (raw_batch_to_space([3, 2], [[0, 0], [0, 0]]),
     r"Input batch dimension \(4\) is not divisible by product of block sizes \(6\)"),
    (raw_batch_to_space([2, 0], [[0, 0], [0, 0]]), "Product of block sizes must be positive, got 0"),
    (raw_batch_to_space([2, 2], [[0, 0], [-1, 0]]), "Crops must be non-negative"),
    (raw_batch_to_space([2, 2], [[0, 0], [5, 5]]), r"cropped_shape\[1\]=-2 must be non-negative"),
])
def test_bad_arguments_are_invalid_argument_as_on_the_cpu(fn, match):
    assert_raises_like_cpu(fn, match, random_array((4, 4, 4, 3), np.float32, seed=11))


def test_a_block_size_op_of_a_3d_input_is_invalid_argument():
    assert_raises_like_cpu(lambda t: tf.raw_ops.SpaceToBatch(input=t, paddings=[[0, 0], [0, 0]],
                                                      block_size=2),
                    "Input rank should be: 4instead of: 3", random_array((4, 4, 3), np.float32))


def test_a_dilated_conv1d_model_trains_on_the_device():
    # A causal dilated Conv1D (a WaveNet / TCN layer): TensorFlow runs it as SpaceToBatchND, a
    # convolution and BatchToSpaceND, and the gradient the other way round.
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((30, 3)),
        keras.layers.Conv1D(8, 3, dilation_rate=2, padding="causal", activation="relu"),
        keras.layers.Conv1D(4, 2, dilation_rate=4, padding="same"),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(2),
    ])
    x = random_array((6, 30, 3), np.float32, seed=12)
    y = random_array((6, 2), np.float32, seed=13)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        return [loss] + tape.gradient(loss, model.trainable_variables)

    expected = run_on("/CPU:0", step, x, y)
    vgpu.reset_stats()
    actual = strictly_on_gpu(step, x, y)
    assert vgpu.stats()["launches"] > 0
    for e, a in zip(expected, actual):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)
