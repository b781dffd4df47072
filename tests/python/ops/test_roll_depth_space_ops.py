"""Roll, DepthToSpace and SpaceToDepth on the virtual GPU against TensorFlow's CPU kernels:
bit-exact in every registered dtype, over several shifts, axes, block sizes and both data formats,
gradients through GradientTape, TensorFlow's errors for bad input, and Keras layers that use them
running on the device with soft placement off (before these kernels, each ran on the CPU with a
copy of its input to the host and of its output back, every step)."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (DATA_MOVEMENT_DTYPES, EXACT, assert_gradients_match_cpu,
                             assert_moves_like_cpu, assert_raises_like_cpu, random_array, run_on,
                             strictly_on_gpu)


# --- Roll ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DATA_MOVEMENT_DTYPES)
def test_roll_matches_cpu_in_every_dtype(dtype):
    x = random_array((3, 5, 4), dtype, seed=1)
    assert_moves_like_cpu(lambda t: tf.roll(t, [2, -1], [1, 2]), x, launches=2)


@pytest.mark.parametrize("shift,axis", [
    (1, 0),
    (-1, 0),
    (4, 1),             # a whole turn of a dimension of 3 and one more
    (-13, 2),
    (1000000007, 3),    # far beyond the dimension
    ([1, 2], [0, 0]),   # a dimension named twice: the shifts add up
    ([2, -1], [-1, -3]),
    ([1, 1, 1], [0, 1, 2]),        # three dimensions: two passes through scratch memory
    ([1, 2, 3, 4], [0, 1, 2, 3]),
])
def test_roll_matches_cpu_for_shifts_and_axes(shift, axis):
    x = random_array((2, 3, 5, 7), np.float32, seed=2)
    assert_moves_like_cpu(lambda t: tf.roll(t, shift, axis), x)


@pytest.mark.parametrize("shift_type,axis_type", [(tf.int32, tf.int64), (tf.int64, tf.int32),
                                                  (tf.int64, tf.int64)])
def test_roll_takes_int32_and_int64_shifts_and_axes(shift_type, axis_type):
    x = random_array((4, 6), np.float32, seed=3)
    assert_moves_like_cpu(lambda t: tf.roll(t, tf.constant([3, -2], shift_type),
                                  tf.constant([0, 1], axis_type)), x, launches=2)


def test_roll_of_one_dimension_is_one_tile_and_one_slice():
    x = random_array((64, 33), np.float32, seed=4)
    assert_moves_like_cpu(lambda t: tf.roll(t, 5, 0), x, launches=2)
    assert_moves_like_cpu(lambda t: tf.roll(t, -5, 1), x, launches=2)


def test_roll_by_whole_turns_forwards_the_input_without_a_launch():
    x = random_array((4, 6), np.float32, seed=5)
    assert_moves_like_cpu(lambda t: tf.roll(t, [4, -6, 0], [0, 1, 1]), x, launches=0)


def test_roll_of_empty_tensors_and_of_rank_8():
    assert_moves_like_cpu(lambda t: tf.roll(t, [1, 2], [0, 1]), np.zeros((0, 3), np.float32), launches=0)
    x = random_array((2, 1, 3, 2, 1, 2, 3, 2), np.float32, seed=6)
    assert_moves_like_cpu(lambda t: tf.roll(t, [1, 2, -1], [0, 6, 7]), x)


def test_roll_gradient_assert_moves_like_cpu():
    x = random_array((3, 4, 5), np.float32, seed=7)
    assert_gradients_match_cpu(lambda t: tf.roll(t, [1, -2], [0, 2]), x, **EXACT)


@pytest.mark.parametrize("shift,axis,match", [
    ([[1]], [[0]], "shift must be a scalar or a 1-D vector"),
    ([1], [[0]], "axis must be a scalar or a 1-D vector"),
    ([1, 2], [0], "shift and axis must have the same size"),
    ([1], [3], "axis 3 is out of range"),
    ([1], [-4], "axis -1 is out of range"),
])
def test_roll_with_bad_arguments_is_invalid_argument(shift, axis, match):
    assert_raises_like_cpu(lambda t: tf.raw_ops.Roll(input=t, shift=shift, axis=axis), match,
                    random_array((2, 3, 4), np.float32))


def test_roll_of_a_scalar_is_invalid_argument():
    assert_raises_like_cpu(lambda t: tf.roll(t, 1, 0), "input must be 1-D or higher",
                    np.float32(3.0))


# --- DepthToSpace, SpaceToDepth --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DATA_MOVEMENT_DTYPES)
def test_depth_to_space_and_back_match_cpu_in_every_dtype(dtype):
    x = random_array((2, 3, 4, 8), dtype, seed=8)
    assert_moves_like_cpu(lambda t: tf.nn.depth_to_space(t, 2), x, launches=1)
    assert_moves_like_cpu(lambda t: tf.nn.space_to_depth(t, 2), random_array((2, 4, 6, 3), dtype, seed=9),
                launches=1)


@pytest.mark.parametrize("block,shape", [(2, (1, 1, 1, 4)), (3, (2, 5, 2, 18)),
                                         (4, (3, 2, 3, 32)), (2, (0, 3, 3, 4))])
def test_depth_to_space_block_sizes_match_cpu(block, shape):
    x = random_array(shape, np.float32, seed=block)
    assert_moves_like_cpu(lambda t: tf.nn.depth_to_space(t, block), x, launches=1 if x.size else 0)


@pytest.mark.parametrize("block,shape", [(2, (1, 2, 2, 1)), (3, (2, 6, 9, 2)),
                                         (4, (3, 8, 4, 5)), (2, (2, 0, 4, 3))])
def test_space_to_depth_block_sizes_match_cpu(block, shape):
    x = random_array(shape, np.float32, seed=block + 10)
    assert_moves_like_cpu(lambda t: tf.nn.space_to_depth(t, block), x, launches=1 if x.size else 0)


@pytest.mark.parametrize("op,shape", [(tf.nn.depth_to_space, (2, 3, 5, 12)),
                                      (tf.nn.space_to_depth, (2, 6, 4, 3))])
def test_nchw_on_the_gpu_matches_nhwc_on_the_cpu(op, shape):
    # TensorFlow's CPU kernels take NHWC only (NCHW is a GPU layout): compare through transposes.
    x = random_array(shape, np.float32, seed=11)
    with tf.device("/CPU:0"):
        expected = op(tf.constant(x), 2).numpy()
    with tf.device("/GPU:0"):
        nchw = tf.transpose(tf.constant(x), [0, 3, 1, 2])
        vgpu.reset_stats()
        actual = op(nchw, 2, data_format="NCHW")
        assert vgpu.stats()["launches"] == 1
        actual = tf.transpose(actual, [0, 2, 3, 1])
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(actual.numpy(), expected)


def test_depth_to_space_and_space_to_depth_gradients_match_cpu():
    assert_gradients_match_cpu(lambda t: tf.nn.depth_to_space(t, 2),
                               random_array((2, 3, 4, 8), np.float32, seed=12), **EXACT)
    assert_gradients_match_cpu(lambda t: tf.nn.space_to_depth(t, 3),
                               random_array((2, 6, 3, 2), np.float32, seed=13), **EXACT)


def test_depth_to_space_with_bad_input_is_invalid_argument():
    assert_raises_like_cpu(lambda t: tf.nn.depth_to_space(t, 2),
                    "Input depth dimension 6 should be divisible by: 4",
                    random_array((2, 4, 6, 6), np.float32))
    assert_raises_like_cpu(lambda t: tf.nn.depth_to_space(t, 2), "Input rank should be: 4 instead of: 3",
                    random_array((4, 6, 8), np.float32))


def test_space_to_depth_with_bad_input_is_invalid_argument():
    assert_raises_like_cpu(lambda t: tf.nn.space_to_depth(t, 2),
                    "Image width 6 and height 5 should be divisible by block_size: 2",
                    random_array((2, 5, 6, 3), np.float32))
    assert_raises_like_cpu(lambda t: tf.nn.space_to_depth(t, 2), "Input rank should be 4 instead of 3",
                    random_array((5, 6, 3), np.float32))


# --- Keras models that use them --------------------------------------------------------------

def test_a_sub_pixel_upsampling_model_trains_on_the_device():
    # The super-resolution pattern: a convolution to C * r^2 channels, then depth_to_space(r).
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(12, 3, padding="same")(inputs)
    outputs = keras.layers.Lambda(lambda t: tf.nn.depth_to_space(t, 2))(h)
    model = keras.Model(inputs, outputs)
    x = random_array((4, 8, 8, 3), np.float32, seed=14)
    y = random_array((4, 16, 16, 3), np.float32, seed=15)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        return [loss] + tape.gradient(loss, model.trainable_variables)

    expected = run_on("/CPU:0", step, x, y)
    actual = strictly_on_gpu(step, x, y)
    for e, a in zip(expected, actual):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)


def test_a_shifted_window_roll_and_its_gradient_run_on_the_device():
    # The shifted-window pattern: tf.roll over both spatial dimensions and back.
    keras.utils.set_random_seed(1)
    dense = keras.layers.Dense(6)
    x = random_array((2, 8, 8, 6), np.float32, seed=16)

    def step(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            shifted = tf.roll(t, shift=[-2, -2], axis=[1, 2])
            out = tf.roll(dense(shifted), shift=[2, 2], axis=[1, 2])
            loss = tf.reduce_sum(out * out)
        return loss, tape.gradient(loss, t)

    expected = run_on("/CPU:0", step, x)
    actual = strictly_on_gpu(step, x)
    for e, a in zip(expected, actual):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-5, atol=1e-4)
